"""The copy of a video or audio file that is served: its streams, none of its metadata.

A phone writes where and who into the container around the streams: `©xyz` in
`udta`, Apple's `com.apple.quicktime.location.ISO6709`, make and model in `meta`
(`keys`/`ilst`), a timed metadata track beside the video, Matroska tags, ID3 frames,
WAV `LIST` chunks. Rather than hunt for each of those (a denylist that the next phone
defeats), the served file is rebuilt from an allowlist: the audio and video packets,
copied as they are (no re-encode), into a new container FFmpeg writes with
no metadata at all:
- output streams are made from the input's codec parameters only: no stream or
  container metadata is copied, no data, subtitle or attachment stream, no chapter;
- `fflags=+bitexact` keeps FFmpeg from adding its own `encoder` tag and the mvhd/tkhd
  creation dates; the mp3 muxer writes no ID3 tag at all;
- the codec parameters carry the display matrix, so the mov/mp4 muxer writes it back
  into `tkhd`: a phone's video held upright still plays upright;
- MP4/MOV/M4A are written with `movflags=+faststart`: the `moov` comes first, so a
  player can start before it has the whole file.

Bounded by design: packets stream from the input file through the muxer to a file in
the work dir, one at a time (the demuxer hands them over in time order, so the
muxer's interleaving queue stays small); the job's RLIMIT_FSIZE stops an input whose
sample tables point many packets at the same bytes (the copy would outgrow it), and
the packets' own timestamps are held to the duration bound the headers were (a header
that lies about its duration is caught here). A file that cannot be copied this way is
rejected (corrupt): nothing else of it could be served without its metadata.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import av

from .limits import Bounds
from .outcome import Rejected, short_repr
from .packets import PacketSpan, with_decode_times

# Demuxer (media.sniff) -> muxers to try, in order: the input's own family first; the
# next one only if the first refuses one of the codecs (PCM in an MP4, H.264 in a WebM).
_QUICKTIME_BRANDS = (b"qt  ",)
_AUDIO_MP4_BRANDS = (b"M4A ", b"M4B ", b"M4P ")
_MUXERS = {
    "matroska": ("webm", "matroska"),
    "ogg": ("ogg",),
    "mp3": ("mp3",),
    "wav": ("wav",),
}
_EXT = {
    "mov": "mov",
    "mp4": "mp4",
    "ipod": "m4a",
    "webm": "webm",
    "matroska": "mkv",
    "ogg": "ogg",
    "mp3": "mp3",
    "wav": "wav",
}
_ISO_MUXERS = ("mov", "mp4", "ipod")
_OPTIONS = {
    # bitexact: no `encoder` tag, no creation date, no random Matroska UIDs.
    **{name: {"fflags": "+bitexact"} for name in _EXT},
    **{name: {"fflags": "+bitexact", "movflags": "+faststart"} for name in _ISO_MUXERS},
    "mp3": {"fflags": "+bitexact", "id3v2_version": "0", "write_id3v1": "0"},
}
SERVED_NAME = "served"  # + the muxer's extension, inside the job's work dir


def muxers_for(fmt: str, head: bytes) -> tuple[str, ...]:
    """The muxers a file sniffed as `fmt` is copied with, in the order they are tried."""
    if fmt == "mov":
        brand = head[8:12] if head[4:8] == b"ftyp" else b""
        if brand in _QUICKTIME_BRANDS or not brand:
            return ("mov",)  # QuickTime stays QuickTime: its codecs and tags are at home there
        if brand in _AUDIO_MP4_BRANDS:
            return ("ipod", "mov")
        return ("mp4", "mov")
    return _MUXERS[fmt]


def _copied(stream: Any) -> bool:
    # Cover art rides as a one-frame "video" stream: it is a picture, not the video.
    return stream.type in ("video", "audio") and not stream.disposition & av.stream.Disposition.attached_pic


def _open_output(name: str, muxer: str, streams: list[Any]) -> tuple[Any, dict[int, Any]]:
    """An output container holding a copy of each stream's codec parameters, and nothing else."""
    out = av.open(name, "w", format=muxer, options=dict(_OPTIONS[muxer]))
    try:
        mapping: dict[int, Any] = {}
        for stream in streams:
            copy = out.add_stream_from_template(stream)  # codec parameters (and display matrix) only
            tag = stream.codec_context.codec_tag
            if muxer in _ISO_MUXERS and tag and tag.isprintable():
                # PyAV resets the tag; keep the input's (Apple plays HEVC only as `hvc1`).
                copy.codec_context.codec_tag = tag
            mapping[stream.index] = copy
        out.start_encoding()  # the header: where a muxer refuses a codec it took above (PCM in MP4)
        return out, mapping
    except BaseException:
        try:
            out.close()
        except (av.FFmpegError, OSError, ValueError):
            pass  # a header never written has no trailer to write
        raise


def _choose(work_dir: Path, muxers: tuple[str, ...], streams: list[Any]) -> tuple[str, str, Any, dict[int, Any]]:
    refused = []
    for muxer in muxers:
        name = f"{SERVED_NAME}.{_EXT[muxer]}"
        try:
            out, mapping = _open_output(str(work_dir / name), muxer, streams)
        except (ValueError, av.FFmpegError) as exc:  # "'mp4' format does not support 'pcm_s16le' codec"
            refused.append(f"{muxer}: {short_repr(str(exc), 80)}")
            continue
        return muxer, name, out, mapping
    raise Rejected("corrupt", f"no container takes these streams as they are: {'; '.join(refused)}")


def _limits(streams: list[Any], bounds: Bounds) -> dict[int, int | None]:
    """Per stream, the last timestamp the duration bound allows (None: no time base to count in)."""
    out: dict[int, int | None] = {}
    for stream in streams:
        base = stream.time_base
        if not base:
            out[stream.index] = None
            continue
        start = stream.start_time if stream.start_time is not None else 0
        out[stream.index] = start + int(bounds.media_max_duration_seconds / base)
    return out


def remux(src: Any, fmt: str, head: bytes, work_dir: Path, bounds: Bounds, opener: Any) -> dict[str, Any]:
    """Copy the audio and video packets of `src` into a metadata-free file; return its facts.

    `opener(src, fmt)` opens the input the way the probe did (media._open). The facts
    name the file (in work_dir) and its muxer; the worker measures and hashes it itself.
    """
    with opener(src, fmt) as container:
        streams = [s for s in container.streams if _copied(s)]
        if not streams:
            raise Rejected("corrupt", "no audio or video stream to serve")
        muxer, name, out, mapping = _choose(work_dir, muxers_for(fmt, head), streams)
        last = _limits(streams, bounds)
        span = PacketSpan.of(container)
        packets = 0
        try:
            with out:
                for packet in with_decode_times(container.demux(streams), fmt):
                    bound = last[packet.stream.index]
                    if bound is not None and packet.dts is not None and packet.dts > bound:
                        raise Rejected(
                            "duration_limit",
                            f"packets run past {bounds.media_max_duration_seconds} s (more than the headers declare)",
                        )
                    span.add(packet)
                    packet.stream = mapping[packet.stream.index]
                    out.mux(packet)
                    packets += 1
        except (av.FFmpegError, OSError, ValueError) as exc:
            # EFBIG here is RLIMIT_FSIZE: the copy outgrew the input (packets sharing bytes).
            raise Rejected(
                "corrupt", f"cannot copy the streams into a clean file: {short_repr(str(exc), 160)}"
            ) from None
    if packets == 0:
        raise Rejected("corrupt", "no packet to serve")
    return {"file": name, "muxer": muxer, "packets": packets, **span.facts()}
