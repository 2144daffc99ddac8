"""The `web` rendition of a video: H.264 High (yuv420p) + AAC-LC in an MP4 whose `moov` comes first.

Made only for a video that would not play in every current browser as it is
(processing/renditions.py decides; docs/api.md, "The web rendition of a video", says
which). Runs in its own job, after the file is ready, from the file that is served
(the location-free copy):

1. the input is opened as the probe opens it (media.py: our sniffed demuxer, headers
   only) and held to the same bounds before a frame is decoded;
2. every video frame is decoded, turned upright by its display matrix, scaled to fit
   the long edge the worker asked for (never up), converted to yuv420p and encoded
   with libx264 (profile High, `crf`, capped by `maxrate`, a keyframe every 2 s);
3. the first audio stream is decoded, resampled to stereo (or mono) 48 kHz float
   planar and encoded with FFmpeg's AAC encoder (AAC-LC);
4. the MP4 muxer writes `+faststart` and `+bitexact`: no encoder tag, no dates, no
   metadata of the source, no display matrix (the frames are upright already).

Progress (permille of the declared duration) is written to a small file in the
work dir that the worker reads while it waits (processing/transcode.py). The job's
CPU and wall limits scale with the clip's duration (settings), its output with the
bit rate cap: a stream that runs past either is killed and reported as a timeout.
"""

from __future__ import annotations

import os
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import av

from . import media
from .limits import Bounds
from .outcome import Rejected, Source, short_repr

OUTPUT_NAME = "web.mp4"
PROGRESS_NAME = "progress"
PROGRESS_EVERY_SECONDS = 1.0
AUDIO_RATE = 48000
AUDIO_BIT_RATE = 128_000
KEYFRAME_SECONDS = 2
# Clockwise degrees the frame is turned to be shown -> the filters that turn it.
_TURN = {90: (("transpose", "clock"),), 180: (("hflip", None), ("vflip", None)), 270: (("transpose", "cclock"),)}


def fit(width: int, height: int, long_edge: int) -> tuple[int, int]:
    """(width, height) scaled to fit `long_edge` (never up), both even (yuv420p halves the chroma)."""
    scale = min(1.0, long_edge / max(width, height))
    w, h = round(width * scale), round(height * scale)
    return max(2, w - w % 2), max(2, h - h % 2)


def encoder_options(bounds: Bounds, frame_rate: Fraction | None) -> dict[str, str]:
    """libx264's settings for this job: the one place the bench's bare encode takes them from too."""
    gop = max(1, round(float(frame_rate or 30) * KEYFRAME_SECONDS))
    return {
        "preset": bounds.transcode_preset,
        "crf": str(bounds.transcode_crf),
        "profile": "high",
        "maxrate": str(bounds.transcode_max_bit_rate),
        "bufsize": str(bounds.transcode_max_bit_rate * 2),
        "g": str(gop),
        "threads": str(bounds.transcode_threads),
    }


class _Progress:
    def __init__(self, work_dir: Path, duration: float) -> None:
        self.path = os.path.join(work_dir, PROGRESS_NAME)
        self.duration = max(duration, 0.001)
        self.written = -1
        self.last = 0.0

    def update(self, seconds: float, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < PROGRESS_EVERY_SECONDS:
            return
        permille = max(0, min(1000, int(seconds / self.duration * 1000)))
        if permille == self.written:
            return
        self.last, self.written = now, permille
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(str(permille))


class _Video:
    """Decoded frames in, upright scaled yuv420p frames out to the encoder."""

    def __init__(self, out: Any, stream: Any, bounds: Bounds, long_edge: int) -> None:
        self.out, self.input, self.bounds, self.long_edge = out, stream, bounds, long_edge
        stream.codec_context.thread_count = bounds.transcode_threads
        self.graph: Any = None
        self.encoder: Any = None
        self.size = (0, 0)
        self.frames = 0

    def _build(self, frame: Any) -> None:
        turn = (-int(round(frame.rotation or 0))) % 360
        shown = (frame.height, frame.width) if turn in (90, 270) else (frame.width, frame.height)
        self.size = fit(*shown, self.long_edge)
        graph = av.filter.Graph()
        chain = [
            graph.add_buffer(width=frame.width, height=frame.height, format=frame.format, time_base=frame.time_base)
        ]
        for name, args in _TURN.get(turn, ()):
            chain.append(graph.add(name, args))
        chain.append(graph.add("scale", f"{self.size[0]}:{self.size[1]}:flags=bicubic"))
        chain.append(graph.add("format", "yuv420p"))
        chain.append(graph.add("buffersink"))
        graph.link_nodes(*chain).configure()
        self.graph = graph
        rate = self.input.average_rate or self.input.guessed_rate
        encoder = self.out.add_stream("libx264", rate=rate, options=encoder_options(self.bounds, rate))
        encoder.width, encoder.height, encoder.pix_fmt = *self.size, "yuv420p"
        encoder.codec_context.time_base = frame.time_base
        encoder.time_base = frame.time_base
        self.encoder = encoder

    def push(self, frame: Any) -> None:
        if frame.width * frame.height > self.bounds.media_max_pixels:
            raise Rejected("pixel_limit", f"decoded frame {frame.width}x{frame.height} over the bound")
        if self.graph is None:
            self._build(frame)
        self.graph.push(frame)
        self._drain()

    def _drain(self) -> None:
        while True:
            try:
                frame = self.graph.pull()
            except (av.BlockingIOError, av.EOFError):
                return
            frame.pict_type = av.video.frame.PictureType.NONE  # the encoder chooses its own keyframes
            self.frames += 1
            self.out.mux(self.encoder.encode(frame))

    def flush(self) -> None:
        if self.graph is None:
            raise Rejected("corrupt", "no video frame could be decoded")
        self.graph.push(None)
        self._drain()
        self.out.mux(self.encoder.encode(None))


class _Audio:
    def __init__(self, out: Any, stream: Any) -> None:
        channels = stream.codec_context.channels or 2
        layout = "mono" if channels == 1 else "stereo"
        self.encoder = out.add_stream("aac", rate=AUDIO_RATE)
        self.encoder.layout = layout
        self.encoder.bit_rate = AUDIO_BIT_RATE
        self.resampler = av.AudioResampler(format="fltp", layout=layout, rate=AUDIO_RATE)
        self.out = out

    def push(self, frame: Any) -> None:
        frame.pts = None  # the resampler and the encoder count samples themselves
        for resampled in self.resampler.resample(frame):
            self.out.mux(self.encoder.encode(resampled))

    def flush(self) -> None:
        for resampled in self.resampler.resample(None):
            self.out.mux(self.encoder.encode(resampled))
        self.out.mux(self.encoder.encode(None))


def process(src: Source, work_dir: Path, bounds: Bounds) -> tuple[dict[str, Any], dict[str, str]]:
    """Make the web rendition of one video; the worker has already decided it is needed."""
    # Bulk work nobody waits on: at nice 19 a photo's decode (nice 0) takes the CPU first on a busy host.
    os.nice(19)
    fmt = media.sniff(media._head(src))
    if fmt is None:
        raise Rejected("corrupt", "not an MP4/MOV, WebM/Matroska, Ogg, WAV or MP3 file")
    with media._open(src, fmt) as container:
        facts = media.check_bounds(container, bounds)
        if not container.streams.video:
            raise Rejected("corrupt", "no video stream to transcode")
        duration = float(facts["duration_seconds"] or 0)
        long_edge = bounds.transcode_long_edge
        video_in = container.streams.video[0]
        audio_in = container.streams.audio[0] if container.streams.audio else None
        progress = _Progress(work_dir, duration)
        out_path = os.path.join(work_dir, OUTPUT_NAME)
        try:
            with av.open(out_path, "w", format="mp4", options={"movflags": "+faststart", "fflags": "+bitexact"}) as out:
                audio = _Audio(out, audio_in) if audio_in is not None else None
                video = _Video(out, video_in, bounds, long_edge)
                # The audio encoder is added first but its packets wait until the video's
                # stream exists: the muxer's header is written on the first mux, after both.
                pending: list[Any] = []
                # The probe bounded the declared duration; the packets are held to it here.
                limit = min(duration + 60, float(bounds.media_max_duration_seconds))
                for packet in container.demux([s for s in (video_in, audio_in) if s is not None]):
                    # The demuxer's last packet per stream (no dts) flushes that stream's decoder.
                    seconds = (
                        float(packet.dts * packet.time_base) if packet.dts is not None and packet.time_base else 0.0
                    )
                    if seconds > limit:
                        raise Rejected("duration_limit", "packets run past the declared duration")
                    for frame in packet.decode():
                        if packet.stream is video_in:
                            video.push(frame)
                            for held in pending:
                                assert audio is not None
                                audio.push(held)
                            pending.clear()
                        elif audio is not None:
                            if video.encoder is None:
                                pending.append(frame)
                                if len(pending) > 2048:
                                    raise Rejected("corrupt", "audio runs far ahead of the first video frame")
                            else:
                                audio.push(frame)
                    progress.update(seconds)
                video.flush()
                if audio is not None:
                    for held in pending:
                        audio.push(held)
                    audio.flush()
        except (av.FFmpegError, ValueError) as exc:
            raise Rejected("corrupt", f"cannot transcode: {short_repr(str(exc), 160)}") from None
        progress.update(duration, force=True)
    width, height = video.size
    data = {
        "file": OUTPUT_NAME,
        "codec": "h264",
        "width": width,
        "height": height,
        "frames": video.frames,
        "audio_codec": "aac" if audio is not None else None,
    }
    return data, {"web": OUTPUT_NAME}
