#!/usr/bin/env python
"""The web rendition of an HEVC clip under `serve` vs the same PyAV encode in-process; photos during transcodes.

    .venv/bin/python bench/transcode_bench.py [--quick] [--rounds R] [--photos N]

The clip: 60 s of 1920x1080 HEVC (libx265 from the PyAV wheel, ultrafast) at 30 fps, tagged
`hvc1` in an MP4, with 48 kHz stereo AAC; --quick: 10 s of 1280x720. Its picture is FFmpeg's
`testsrc2` (moving shapes and a counter) with temporal grain (`noise`), so every frame costs
the encoder something, as a phone's does. Made once per run with PyAV.

- transcode_vs_bare_pyav_ratio: ours = `manage.py serve` on the environment it is given
  (bench/run.py: the embedded defaults, SQLite, local storage, the worker in the one web
  process), the clip uploaded (`media`), then the time from the moment the resource says
  `ready` to the moment its `renditions.web.status` says `ready` (polled every 0.1 s): the
  transcode job's queueing, the sandboxed decode + encode (processing/sandbox/transcode.py),
  storing and recording it. Bare = in this process, from the same file: every video frame
  decoded (the decoder's thread count as the sandbox sets it), scaled to the same size
  (`fit`) in yuv420p, its picture type cleared (the encoder chooses its own frame types, as
  in the sandbox: the source's, taken as forced, cost about a quarter less CPU and gave a file
  65 % larger), encoded with libx264 with `encoder_options()` (the sandbox's own
  settings, the one source both take them from), the audio resampled to 48 kHz fltp and
  encoded with FFmpeg's AAC at the same bit rate, muxed to MP4 with `+faststart`. Rounds
  interleaved: bare, ours, bare, …; each ours ÷ the mean of the bare runs around it; median.
  Goal ≤ 1.15.
- ttr_p99_during_transcodes_s: two more clips uploaded (so two transcodes queued or
  running: AIRLOCK_TRANSCODE_CONCURRENCY is 1 by default, so one runs and one waits),
  then, while a rendition is still pending, 12 MP camera photos (bench/common.photo_jpeg)
  uploaded one after the other: each one's ready_at (server clock) minus the moment its
  PUT returned (same machine); nearest-rank p99 over the photos that became ready while a
  transcode was still pending (the count is reported). Goal ≤ 1 s.

The machine is shared: `load_average` (1, 5, 15 min, at the start and the end) is printed
beside the figures.

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import array
import math
import os
import sys
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.common import (  # noqa: E402
    createuser,
    emit,
    local_env,
    median,
    percentile,
    photo_jpeg,
    r,
    scratch_dir,
    serve,
    wait_ready,
)
from tests.support.processes import api_upload  # noqa: E402

FPS = 30


def make_clip(path: Path, *, seconds: int, size: tuple[int, int]) -> None:
    """An HEVC (libx265) + AAC MP4 of `seconds` of testsrc2 with grain, made with PyAV."""
    import av

    codec = "libx265" if "libx265" in av.codecs_available else "hevc"
    w, h = size
    graph = av.filter.Graph()
    src = graph.add("testsrc2", f"size={w}x{h}:rate={FPS}:duration={seconds}")
    noise = graph.add("noise", "alls=10:allf=t")
    fmt = graph.add("format", "yuv420p")
    sink = graph.add("buffersink")
    graph.link_nodes(src, noise, fmt, sink).configure()
    tone = array.array("h", (int(6000 * math.sin(2 * math.pi * 440 * i / 48000)) for i in range(48000)))
    stereo = array.array("h", (s for v in tone for s in (v, v))).tobytes()
    looped = stereo + stereo  # a frame that starts near the end of the second runs on into the next
    with av.open(str(path), "w", format="mp4", options={"movflags": "+faststart"}) as out:
        video = out.add_stream(
            codec, rate=FPS, options={"preset": "ultrafast", "crf": "24", "x265-params": "log-level=error"}
        )
        video.width, video.height, video.pix_fmt = w, h, "yuv420p"
        video.codec_tag = "hvc1"
        audio = out.add_stream("aac", rate=48000)
        audio.layout = "stereo"
        audio.bit_rate = 128_000
        samples = 0
        for _ in range(seconds * FPS):
            frame = sink.pull()
            out.mux(video.encode(frame))
            while samples < (frame.pts + 1) * 48000 / FPS:  # keep the audio along with the picture
                n = 1024
                aframe = av.AudioFrame(format="s16", layout="stereo", samples=n)
                offset = (samples % 48000) * 4
                chunk = looped[offset : offset + n * 4]
                aframe.planes[0].update(chunk)
                aframe.sample_rate = 48000
                aframe.pts = samples
                out.mux(audio.encode(aframe))
                samples += n
        out.mux(video.encode(None))
        out.mux(audio.encode(None))


def bare_encode(src: Path, dst: Path) -> float:
    """The rendition's work with PyAV in this process, the sandbox's settings; seconds."""
    import av

    from processing import renditions
    from processing.sandbox.limits import Bounds
    from processing.sandbox.transcode import AUDIO_BIT_RATE, AUDIO_RATE, encoder_options, fit

    started = time.perf_counter()
    with av.open(str(src)) as container:
        duration = float(container.duration or 0) / 1_000_000
        bounds = renditions.job_bounds(Bounds(), duration)
        vin = container.streams.video[0]
        ain = container.streams.audio[0]
        vin.codec_context.thread_count = bounds.transcode_threads
        rate = vin.average_rate or vin.guessed_rate
        with av.open(str(dst), "w", format="mp4", options={"movflags": "+faststart", "fflags": "+bitexact"}) as out:
            vout = out.add_stream("libx264", rate=rate, options=encoder_options(bounds, rate))
            aout = out.add_stream("aac", rate=AUDIO_RATE)
            aout.layout = "stereo"
            aout.bit_rate = AUDIO_BIT_RATE
            resampler = av.AudioResampler(format="fltp", layout="stereo", rate=AUDIO_RATE)
            size = None
            for packet in container.demux(vin, ain):
                for frame in packet.decode():
                    if packet.stream is vin:
                        if size is None:
                            size = fit(frame.width, frame.height, bounds.transcode_long_edge)
                            vout.width, vout.height, vout.pix_fmt = *size, "yuv420p"
                            vout.codec_context.time_base = frame.time_base
                            vout.time_base = frame.time_base
                        scaled = frame.reformat(
                            width=size[0], height=size[1], format="yuv420p", interpolation="BICUBIC"
                        )
                        scaled.pts = frame.pts
                        scaled.time_base = frame.time_base
                        # As the sandbox does: a decoded frame keeps the source's picture type,
                        # which libx264 takes as forced (no frame type decisions of its own).
                        scaled.pict_type = av.video.frame.PictureType.NONE
                        out.mux(vout.encode(scaled))
                    else:
                        frame.pts = None
                        for resampled in resampler.resample(frame):
                            out.mux(aout.encode(resampled))
            out.mux(vout.encode(None))
            for resampled in resampler.resample(None):
                out.mux(aout.encode(resampled))
            out.mux(aout.encode(None))
    return time.perf_counter() - started


def _resource(session, base: str, attachment_id: str) -> dict:
    got = session.get(f"{base}/api/v1/attachments/{attachment_id}", timeout=60)
    got.raise_for_status()
    return got.json()


def _web_status(body: dict) -> str | None:
    return ((body.get("renditions") or {}).get("web") or {}).get("status")


def ours(session, base: str, token: str, clip: Path, n: int) -> float:
    """Upload the clip; seconds from `ready` seen to `renditions.web.status == ready` seen."""
    attachment_id = api_upload(
        base, token, clip.read_bytes(), profile="media", filename=f"clip-{n}.mp4", content_type="video/mp4", timeout=600
    )
    wait_ready(base, token, attachment_id, timeout=1800, poll=5)
    ready_seen = time.perf_counter()
    while True:
        status = _web_status(_resource(session, base, attachment_id))
        if status == "ready":
            return time.perf_counter() - ready_seen
        if status not in ("pending", None):
            raise RuntimeError(f"{attachment_id}: web rendition {status}")
        if time.perf_counter() - ready_seen > 3600:
            raise RuntimeError(f"{attachment_id}: web rendition still pending after an hour")
        time.sleep(0.1)


def main() -> None:
    import requests

    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--photos", type=int, default=None)
    args = parser.parse_args()
    rounds = args.rounds or (2 if args.quick else 3)
    photos = args.photos or (10 if args.quick else 30)
    seconds, size = (10, (1280, 720)) if args.quick else (60, (1920, 1080))
    load_start = os.getloadavg()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
    import django

    django.setup()  # the bare side reads the rendition's settings (processing/renditions.job_bounds)

    tmp = scratch_dir("transcode-bench-")
    clip = tmp / "clip.mp4"
    made = time.perf_counter()
    make_clip(clip, seconds=seconds, size=size)
    clip_seconds = time.perf_counter() - made
    pictures = [photo_jpeg(seed) for seed in range(3)]
    env = local_env(tmp)
    server = serve(env, tmp)
    base = server.base
    try:
        token = createuser(env, "bench")
        session = requests.Session()
        session.headers.update({"Authorization": f"Token {token}"})

        bare_runs = [bare_encode(clip, tmp / "bare.mp4")]
        our_runs: list[float] = []
        for n in range(rounds):
            our_runs.append(ours(session, base, token, clip, n))
            bare_runs.append(bare_encode(clip, tmp / "bare.mp4"))
        ratios = [o / ((bare_runs[i] + bare_runs[i + 1]) / 2) for i, o in enumerate(our_runs)]

        # Photos while two transcodes are queued or running.
        clips = [
            api_upload(
                base,
                token,
                clip.read_bytes(),
                profile="media",
                filename=f"busy-{i}.mp4",
                content_type="video/mp4",
                timeout=600,
            )
            for i in range(2)
        ]
        for attachment_id in clips:
            wait_ready(base, token, attachment_id, timeout=1800, poll=5)
        ttr: list[float] = []
        after: list[float] = []
        for i in range(photos):
            data = pictures[i % len(pictures)]
            data = data[:2] + b"\xff\xfe" + (len(f"{i}") + 2).to_bytes(2, "big") + f"{i}".encode() + data[2:]
            attachment_id = api_upload(
                base, token, data, profile="image", filename=f"photo-{i}.jpg", content_type="image/jpeg", timeout=120
            )
            sent = time.time()
            body = wait_ready(base, token, attachment_id, timeout=600, poll=10)
            took = datetime.fromisoformat(body["ready_at"].replace("Z", "+00:00")).timestamp() - sent
            busy = any(_web_status(_resource(session, base, c)) == "pending" for c in clips)
            (ttr if busy else after).append(max(0.0, took))
            if not busy:
                break
        emit(
            {
                "transcode_vs_bare_pyav_ratio": r(median(ratios)),
                "ttr_p99_during_transcodes_s": r(percentile(ttr, 99)) if ttr else None,
                "transcode": {
                    "clip": f"{seconds} s {size[0]}x{size[1]} HEVC + AAC, {clip.stat().st_size} bytes",
                    "clip_made_s": r(clip_seconds, 1),
                    "ours_s": [r(x, 2) for x in our_runs],
                    "bare_s": [r(x, 2) for x in bare_runs],
                    "ratios": [r(x) for x in ratios],
                    "photos_during_transcodes": len(ttr),
                    "ttr_during_transcodes_p50_s": r(median(ttr)) if ttr else None,
                    "photos_after_transcodes": len(after),
                    "load_average_start": [round(x, 2) for x in load_start],
                    "load_average_end": [round(x, 2) for x in os.getloadavg()],
                },
            }
        )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
