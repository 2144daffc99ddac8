"""Video and audio on the attachment's change page: the player and the probe's facts, readably.

The facts are the ones the sandboxed probe wrote into `metadata` (processing/steps/media.py);
nothing here opens the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.utils.html import format_html, format_html_join

_CHANNELS = {1: "mono", 2: "stereo", 6: "5.1", 8: "7.1"}


def is_media(metadata: Mapping[str, Any] | None) -> bool:
    """Probed as video or audio: only the media step writes `duration_seconds`."""
    return metadata is not None and "duration_seconds" in metadata


def format_duration(seconds: float) -> str:
    """1:02:03 or 0:07, to the nearest second (an AAC track of 1.98 s is 0:02)."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _bit_rate(bits: int) -> str:
    if bits >= 1_000_000:
        return f"{bits / 1_000_000:.1f} Mbit/s"
    return f"{bits / 1000:.0f} kbit/s"


def _number(value: float) -> str:
    return f"{value:g}"


def media_facts(metadata: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, value) for each fact the probe found; a fact it could not read is left out."""
    m = metadata
    rows: list[tuple[str, str]] = []
    if m.get("duration_seconds") is not None:
        seconds = float(m["duration_seconds"])
        rows.append(("Duration", f"{format_duration(seconds)} ({_number(round(seconds, 3))} s)"))
    if m.get("container"):
        rows.append(("Container", str(m["container"])))
    if m.get("width") and m.get("height"):
        rows.append(("Dimensions", f"{m['width']} × {m['height']} px (as shown)"))
    if m.get("video_codec"):
        rows.append(("Video codec", str(m["video_codec"])))
    if m.get("frame_rate"):
        rows.append(("Frame rate", f"{_number(float(m['frame_rate']))} fps"))
    if m.get("rotation") is not None and m.get("video_codec"):
        turned = int(m["rotation"])
        rows.append(("Rotation", f"{turned}° clockwise" if turned else "none"))
    if m.get("audio_codec"):
        rows.append(("Audio codec", str(m["audio_codec"])))
    if m.get("audio_channels"):
        channels = int(m["audio_channels"])
        name = _CHANNELS.get(channels)
        rows.append(("Audio channels", f"{channels} ({name})" if name else str(channels)))
    if m.get("audio_sample_rate"):
        rows.append(("Sample rate", f"{_number(int(m['audio_sample_rate']) / 1000)} kHz"))
    if m.get("bit_rate"):
        rows.append(("Bit rate", _bit_rate(int(m["bit_rate"]))))
    if m.get("stream_count") is not None:
        rows.append(("Streams", str(m["stream_count"])))
    return rows


def media_facts_html(metadata: Mapping[str, Any]) -> str:
    rows = media_facts(metadata)
    if not rows:
        return "—"
    body = format_html_join("", '<tr><th scope="row">{}</th><td>{}</td></tr>', rows)
    return format_html('<table class="airlock-media-facts"><tbody>{}</tbody></table>', body)


def player_html(*, content_type: str, src: str, poster: str | None) -> str:
    """A <video> (with its poster) or an <audio>; nothing is fetched until staff press play."""
    if content_type.startswith("audio/"):
        return format_html('<audio class="airlock-player" controls preload="none" src="{}"></audio>', src)
    if poster:
        return format_html(
            '<video class="airlock-player" controls preload="none" playsinline poster="{}" src="{}"></video>',
            poster,
            src,
        )
    return format_html('<video class="airlock-player" controls preload="none" playsinline src="{}"></video>', src)
