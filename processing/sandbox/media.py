"""Video and audio: probe the headers with PyAV (FFmpeg's demuxers), bound, one poster frame.

Order is the point, as in images.py:
1. sniff the container ourselves and hand FFmpeg that one demuxer (`format=`), so a
   file never reaches a demuxer we did not choose (HLS, concat, image2 and the like,
   which would open other files or URLs);
2. read the headers only (av.open) and check every bound on what they declare before
   any frame is decoded: stream count, codec allowlist, frame pixels, duration. A
   container that cannot be demuxed to the end of its headers (an MP4 cut before its
   `moov`) is corrupt;
3. decode one video frame near 1 s (the keyframe at or before it, so one GOP at most),
   on one thread, turn it by the display matrix and make the poster and the thumbnail.
The probe walks no packet: a header that lies about the duration only changes what
metadata says, and the job's CPU and memory limits bound whatever one GOP costs.
4. once every bound held, remux.py copies the audio and video packets into the file
   that is served, without any of the container's metadata (a phone's location).
"""

from __future__ import annotations

import io
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
from PIL import Image

from .limits import Bounds
from .outcome import Rejected, Source, short_repr, write_file
from .remux import remux
from .truncation import check_complete

VIDEO_CODECS = frozenset({"h264", "hevc", "vp8", "vp9", "av1"})
AUDIO_CODECS = frozenset({"aac", "opus", "mp3"})  # and every pcm_* (WAV, MOV)
# Decoder names FFmpeg reports for an allowlisted codec.
_CODEC_ALIASES = {"libdav1d": "av1", "libvpx": "vp8", "libvpx-vp9": "vp9", "mp3float": "mp3", "libopus": "opus"}
POSTER_AT_US = 1_000_000  # near 1 s: past a fade-in, still inside the shortest clip's first GOP
POSTER_MAX_PACKETS = 4096  # packets read looking for one frame (a GOP is far shorter)
# Clockwise degrees -> Pillow's transposition (Pillow's ROTATE_n turns counter-clockwise).
_TRANSPOSE = {90: Image.Transpose.ROTATE_270, 180: Image.Transpose.ROTATE_180, 270: Image.Transpose.ROTATE_90}


def sniff(head: bytes) -> str | None:
    """The FFmpeg demuxer for these first bytes, or None (not a container we take)."""
    if head[4:8] == b"ftyp" or head[4:8] in (b"moov", b"mdat", b"wide", b"free"):
        return "mov"  # mov,mp4,m4a
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return "matroska"  # matroska,webm
    if head.startswith(b"OggS"):
        return "ogg"
    if head.startswith(b"RIFF") and head[8:12] == b"WAVE":
        return "wav"
    if head.startswith(b"ID3") or (len(head) > 1 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0):
        return "mp3"
    return None


def _codec(stream: Any) -> str:
    name = str(stream.codec_context.name or "")
    return _CODEC_ALIASES.get(name, name)


def _allowed(kind: str, codec: str) -> bool:
    if kind == "video":
        return codec in VIDEO_CODECS
    if kind == "audio":
        return codec in AUDIO_CODECS or codec.startswith("pcm_")
    return True  # data, subtitle, attachment streams are never decoded (an iPhone's metadata track)


def _duration_seconds(container: Any) -> float | None:
    if container.duration is not None and container.duration > 0:
        return container.duration / 1_000_000
    longest = None
    for stream in container.streams:
        if stream.duration and stream.time_base:
            seconds = float(stream.duration * stream.time_base)
            longest = seconds if longest is None else max(longest, seconds)
    return longest


def _rate(value: Fraction | None) -> float | None:
    return round(float(value), 3) if value else None


def check_bounds(container: Any, bounds: Bounds) -> dict[str, Any]:
    """Every bound, from the headers only; returns the facts read on the way."""
    streams = list(container.streams)
    if len(streams) > bounds.media_max_streams:
        raise Rejected("stream_limit", f"{len(streams)} streams > {bounds.media_max_streams}")
    if not container.streams.video and not container.streams.audio:
        raise Rejected("corrupt", "no audio or video stream")
    for stream in streams:
        codec = _codec(stream)
        if not _allowed(stream.type, codec):
            raise Rejected("codec_not_allowed", f"{stream.type} codec {short_repr(codec, 40)} is not allowed")
    for stream in container.streams.video:
        width, height = stream.codec_context.width, stream.codec_context.height
        if width <= 0 or height <= 0:
            raise Rejected("corrupt", f"video stream without a frame size ({width}x{height})")
        if width * height > bounds.media_max_pixels:
            raise Rejected("pixel_limit", f"{width}x{height} = {width * height} pixels > {bounds.media_max_pixels}")
    duration = _duration_seconds(container)
    if duration is None:
        raise Rejected("corrupt", "the headers declare no duration")
    if duration > bounds.media_max_duration_seconds:
        raise Rejected("duration_limit", f"{duration:.0f} s > {bounds.media_max_duration_seconds} s")
    facts: dict[str, Any] = {
        "container": container.format.name,
        "duration_seconds": round(duration, 3),
        "bit_rate": container.bit_rate or None,
        "stream_count": len(streams),
        "video_codec": None,
        "video_profile": None,
        "frame_rate": None,
        "width": None,
        "height": None,
        "rotation": None,
        "audio_codec": None,
        "audio_channels": None,
        "audio_sample_rate": None,
    }
    if container.streams.video:
        video = container.streams.video[0]
        facts.update(
            video_codec=_codec(video),
            video_profile=video.codec_context.profile or None,
            frame_rate=_rate(video.average_rate or video.guessed_rate),
            width=video.codec_context.width,
            height=video.codec_context.height,
        )
    if container.streams.audio:
        audio = container.streams.audio[0]
        facts.update(
            audio_codec=_codec(audio),
            audio_channels=audio.codec_context.channels or None,
            audio_sample_rate=audio.codec_context.sample_rate or None,
        )
    return facts


def _poster_frame(container: Any) -> Any:
    """The first frame decoded from the keyframe at or before POSTER_AT_US (or from the start)."""
    stream = container.streams.video[0]
    stream.codec_context.thread_count = 1  # one core's CPU budget, within RLIMIT_NPROC
    if (container.duration or 0) > POSTER_AT_US:
        try:
            container.seek(POSTER_AT_US, backward=True, any_frame=False)
        except av.FFmpegError:
            container.seek(0)
    for n, packet in enumerate(container.demux(stream)):
        if n >= POSTER_MAX_PACKETS:
            break
        for frame in packet.decode():
            return frame
    raise Rejected("corrupt", "no video frame could be decoded")


def _oriented(frame: Any, bounds: Bounds) -> Image.Image:
    if frame.width * frame.height > bounds.media_max_pixels:  # the decoder's own reading, a second fence
        raise Rejected("pixel_limit", f"decoded frame {frame.width}x{frame.height} over the bound")
    image = frame.to_image()  # RGB24, through swscale
    # FFmpeg's angle is counter-clockwise; the frame must be turned by its opposite to be shown.
    turn = (-int(round(frame.rotation or 0))) % 360
    return image.transpose(_TRANSPOSE[turn]) if turn in _TRANSPOSE else image


def _webp(image: Image.Image, size: int, quality: int) -> tuple[bytes, Image.Image]:
    shown = image.copy()
    shown.thumbnail((size, size))
    buf = io.BytesIO()
    shown.save(buf, "WEBP", quality=quality, method=2)
    return buf.getvalue(), shown


def _open(src: Source, fmt: str) -> Any:
    target = str(src) if isinstance(src, (str, Path)) else src
    if not isinstance(target, str):
        target.seek(0)
    try:
        # For the decoders avformat_find_stream_info opens to fill in the stream parameters:
        # skip_frame=all lets them parse headers (the frame size) but decode no picture, so a
        # huge frame is never allocated before check_bounds; one thread each. The decoder the
        # poster uses is opened afterwards, without these options.
        return av.open(target, format=fmt, options={"threads": "1", "skip_frame": "all"})
    except av.FFmpegError as exc:
        raise Rejected("corrupt", f"cannot demux the headers: {short_repr(str(exc), 160)}") from None


def _head(src: Source) -> bytes:
    if isinstance(src, (str, Path)):
        with open(src, "rb") as fh:
            return fh.read(64)
    src.seek(0)
    head = src.read(64)
    src.seek(0)
    return head


def process(src: Source, work_dir: Path, bounds: Bounds) -> tuple[dict[str, Any], dict[str, str]]:
    """Probe and bound one video or audio file, copy it without its metadata (the served file);
    a video also gets a poster and a thumbnail."""
    head = _head(src)
    fmt = sniff(head)
    if fmt is None:
        raise Rejected("corrupt", "not an MP4/MOV, WebM/Matroska, Ogg, WAV or MP3 file")
    data, files = _probe(src, fmt, work_dir, bounds)
    # Only once every bound held: the copy walks every packet, the probe none.
    data["served"] = remux(src, fmt, head, work_dir, bounds, _open)
    check_complete(fmt, data["duration_seconds"], data["served"])
    files["served"] = data["served"]["file"]
    return data, files


def _probe(src: Source, fmt: str, work_dir: Path, bounds: Bounds) -> tuple[dict[str, Any], dict[str, str]]:
    with _open(src, fmt) as container:
        data = check_bounds(container, bounds)
        if not container.streams.video:
            return data, {}
        try:
            frame = _poster_frame(container)
        except av.FFmpegError as exc:
            raise Rejected("corrupt", f"cannot decode a frame: {short_repr(str(exc), 160)}") from None
        image = _oriented(frame, bounds)
    rotation = (-int(round(frame.rotation or 0))) % 360
    data["rotation"] = rotation
    if rotation in (90, 270):
        data["width"], data["height"] = data["height"], data["width"]
    poster, shown = _webp(image, bounds.poster_size, 82)
    thumbnail, thumb = _webp(shown, bounds.thumbnail_size, 80)
    data["poster"] = {"width": shown.width, "height": shown.height}
    data["thumbnail"] = {"width": thumb.width, "height": thumb.height}
    return data, {
        "thumbnail": write_file(work_dir, "thumbnail.webp", thumbnail),
        "poster": write_file(work_dir, "poster.webp", poster),
    }
