#!/usr/bin/env python
"""Video probe and poster: our sandboxed media job against the same PyAV calls in-process, same run.

    python bench/media_bench.py [--quick]

Ours: processing.sandbox.run_job("media") on a phone-like clip (1920x1080 H.264 at
30 fps with a keyframe every second, stereo AAC; what the pipeline runs: a forked,
confined job that sniffs the container, opens it with that one demuxer, checks every
bound from the headers, decodes one frame near 1 s, turns it, writes a 1280 px WebP
poster and a 256 px WebP thumbnail). Bare: the same PyAV and Pillow calls in this
process, written out plainly (av.open with the same demuxer and options, the same
header facts read, seek to 1 s, decode one frame on one thread, to_image, poster,
thumbnail). in_process (info): our decoder module called in this process, no sandbox.
Methods are interleaved in a shuffled order within each round, each call after a short
settle pause (as bench/heic_bench.py); ratio = ours / bare time per round, median over
rounds. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import io
import shutil
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import emit, median, paired_rounds, photo_jpeg, r, scratch_dir  # noqa: E402

SETTLE_SECONDS = 0.02
SIZE = (1920, 1080)
FPS = 30


def phone_clip(path: Path, seed: int, seconds: int) -> None:
    """A camera-like 1080p clip: a photo panning slowly, H.264 (keyframe each second) + silent AAC."""
    import av
    from PIL import Image

    with Image.open(io.BytesIO(photo_jpeg(seed, (SIZE[0] + 200, SIZE[1])))) as photo:
        photo.load()
        frames = [photo.crop((x, 0, x + SIZE[0], SIZE[1])) for x in range(0, 200, 200 // 8)]
    with av.open(str(path), "w", format="mp4") as container:
        video = container.add_stream("libx264", rate=FPS, options={"preset": "veryfast", "g": str(FPS)})
        video.width, video.height, video.pix_fmt = SIZE[0], SIZE[1], "yuv420p"
        audio = container.add_stream("aac", rate=48000)
        audio.layout = "stereo"
        for i in range(seconds * FPS):
            frame = av.VideoFrame.from_image(frames[(i // 4) % len(frames)])
            frame.pts = i
            for packet in video.encode(frame):
                container.mux(packet)
        for packet in video.encode():
            container.mux(packet)
        size, pts = audio.codec_context.frame_size or 1024, 0
        while pts < seconds * 48000:
            samples = av.AudioFrame(format=audio.format.name, layout="stereo", samples=size)
            for plane in samples.planes:
                plane.update(bytes(plane.buffer_size))
            samples.sample_rate, samples.pts = 48000, pts
            pts += size
            for packet in audio.encode(samples):
                container.mux(packet)
        for packet in audio.encode():
            container.mux(packet)


def bare(path: Path) -> None:
    """The probe and poster with nothing around them: the PyAV and Pillow calls the job makes."""
    import av
    from PIL import Image

    with av.open(str(path), format="mov", options={"threads": "1", "skip_frame": "all"}) as container:
        facts = {"duration": container.duration, "bit_rate": container.bit_rate, "streams": len(container.streams)}
        for stream in container.streams.video:
            facts[stream.index] = (
                stream.codec_context.name,
                stream.codec_context.width,
                stream.codec_context.height,
                stream.average_rate,
            )
        for stream in container.streams.audio:
            facts[stream.index] = (
                stream.codec_context.name,
                stream.codec_context.channels,
                stream.codec_context.sample_rate,
            )
        video = container.streams.video[0]
        video.codec_context.thread_count = 1
        container.seek(1_000_000, backward=True, any_frame=False)
        frame = next(f for packet in container.demux(video) for f in packet.decode())
        image = frame.to_image()
    if frame.rotation:
        image = image.transpose(Image.Transpose.ROTATE_90)
    poster = image.copy()
    poster.thumbnail((1280, 1280))
    poster.save(io.BytesIO(), "WEBP", quality=82, method=2)
    thumb = poster.copy()
    thumb.thumbnail((256, 256))
    thumb.save(io.BytesIO(), "WEBP", quality=80, method=2)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()

    from processing.sandbox import Bounds, run_job, shutdown
    from processing.sandbox import media as media_decoder
    from processing.sandbox.warmup import preload

    tmp = scratch_dir("airlock-bench-media-")
    seconds = 4 if args.quick else 10
    clips = []
    for i in range(1 if args.quick else 2):
        path = tmp / f"clip-{i}.mp4"
        phone_clip(path, 300 + i, seconds)
        clips.append(path)
    rounds = 5 if args.quick else 9
    bounds = Bounds()

    def sandboxed(path: Path) -> None:
        result = run_job("media", path, tmp / "sb" / uuid.uuid4().hex)
        assert result.outcome == "ok", result

    def in_process(path: Path) -> None:
        work = tmp / "ip" / uuid.uuid4().hex
        work.mkdir(parents=True)
        media_decoder.process(path, work, bounds)

    methods = {"run_job": sandboxed, "bare": bare, "in_process": in_process}
    preload()  # the fork server preloads and warms the decoders; do the same for in-process calls
    per_round = paired_rounds(methods, clips, rounds, settle=SETTLE_SECONDS)
    clip_bytes = clips[0].stat().st_size
    shutdown()
    shutil.rmtree(tmp, ignore_errors=True)

    def ratio(ours: str, base: str) -> float | None:
        return r(median(a / b for a, b in zip(per_round[ours], per_round[base])))

    emit(
        {
            "media_probe_poster_vs_bare_pyav_ratio": ratio("run_job", "bare"),
            "media_inprocess_vs_bare_pyav_ratio": ratio("in_process", "bare"),
            "media_ms_per_clip": {name: r(median(v) * 1000, 1) for name, v in per_round.items()},
            "media_clip": {
                "size": list(SIZE),
                "fps": FPS,
                "seconds": seconds,
                "bytes": clip_bytes,
                "clips": len(clips),
                "rounds": rounds,
            },
        }
    )


if __name__ == "__main__":
    main()
