#!/usr/bin/env python
"""A ~1 GiB phone-sized video through the service, against the bare steps on the same file, same run.

    python bench/video1g_bench.py [--quick] [--mib N] [--s3]

The file: 4 s of 1280x720 H.264 noise at 30 fps (ultrafast, crf 20: ~21 MB/s, every frame
costly to compress) encoded once with PyAV, then its packets stream-copied over and over
with shifted timestamps into one MP4 (moov at the end, as a phone writes it) until just
under the target size: 1000 MiB (AIRLOCK_MEDIA_MAX_BYTES is 1 GiB), 256 MiB with --quick.
About 47 s of video a 1000 MiB, far inside the 1-hour duration bound.

Ours: `manage.py serve` on the embedded defaults (SQLite, in-process broker, local storage,
the worker threads inside the one web process), YARA only (CLAMD_SOCKET unset, so both
sides scan with the same engine), profile `media`: intent, one streamed PUT, then the
status long-polled. Time = ready_at (server clock) - the moment the PUT returned (same
machine): everything the pipeline does once the bytes are in (digest, sniff, scan, the
sandboxed probe + poster + remux, storing and hashing the derivatives, the state changes).
Bare: in this process, the same file, the steps and nothing around them: YaraScanner.scan
of the file in place (what processing/steps/scan.py runs on the pipeline's local copy: yara-x
memory-maps it), then processing.sandbox.media.process (probe, bounds, poster,
thumbnail, remux) called directly, no sandbox. Rounds (5; 3 with --quick) interleaved:
bare, ours, bare, ours, ..., bare; each of ours is divided by the mean of the two bare
runs around it, and the ratio is the median over rounds. Each run starts after os.sync(), so
no run pays for the writeback of the gigabytes the one before it wrote (the service still
pays for its own upload's, which is part of what it costs).

  video_1gib_pipeline_vs_bare_steps_ratio  ours / bare (goal <= 1.3)
  video_1gib_worker_rss_growth_mb          RssAnon of the web process that runs the worker
                                           (serve's gunicorn child, /proc/<pid>/status sampled
                                           every 50 ms) from just before the PUT to ready,
                                           peak - start, the largest over rounds
                                           (goal < 64); the sandbox's own
                                           memory is its job's (bounded by its limits)
  video_1gib.*                             the size used (bytes, MiB), seconds of each side

--s3: the same, with only the storage changed: AIRLOCK_STORAGE=s3 on moto's S3 server (its own
process over HTTP, bench/common.MotoServer; SQLite and the in-process broker stay). The upload
follows the intent's plan with the Python client (airlock_client.Client.upload, transport
"intent"): past AIRLOCK_S3_MULTIPART_THRESHOLD (100 MiB) that is the multipart plan, its parts
PUT to presigned URLs, then the complete call, which starts intake (the small warm-up clip goes
by presigned POST + complete; no storage event is needed). Time = ready_at - the moment the
complete call answered, so on top of the bare steps it holds the service's reading of the
object back from the bucket and writing the derivatives into it. The bare side is unchanged
(the same local file). Figures: the names above with an `_s3` suffix, details under
video_1gib_s3.

What crosses the wire in S3 mode (processing/spool.py, attachments/storage/s3.py): the upload
is a multipart plan the server completes, so its key is sealed and read in place (no
snapshot copy); the worker downloads it once (the scanners, probe, poster and remux read that
copy) and uploads the remux (`served`, the size of the original) and the two small images.
The download and that upload are storage IO no implementation avoids, and on moto_server
(one Python process) the upload alone is 34-63 s for 986 MiB. So, beside the goal ratio, two
labelled ratios: ours against the bare steps plus a bare download and upload of the same
bytes against the same moto, in this process (`bare_transfer`, after each bare run), and ours
minus that transfer against the bare steps:

  video_1gib_pipeline_vs_bare_steps_plus_transfer_ratio_s3   ours / (bare + transfer)
  video_1gib_pipeline_minus_transfer_vs_bare_steps_ratio_s3  (ours - transfer) / bare
  video_1gib_s3.bare_download_s / bare_upload_s               the transfer runs

Before this (a snapshot CopyObject of every upload, as 8 MiB UploadPartCopy calls, then one
download per scanner and one for derive), moto's part copies alone took 126 s and 223 s of
the first two rounds of 2026-12-04 (a third failed after 5.5 min and was retried).

The figure names keep "1gib" with --quick; video_1gib.file_mib says what was used.
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    MotoServer,
    createuser,
    embedded_env,
    emit,
    median,
    migrate,
    r,
    scratch_dir,
    serve,
    timed,
    wait_ready,
)

MIB = 1 << 20
SIZE = (1280, 720)
FPS = 30
CLIP_SECONDS = 4
CHUNK = 1 * MIB  # the storage read size is not ours to choose here; 1 MiB chunks feed the bare scan


def noise_clip(path: Path) -> None:
    """CLIP_SECONDS of H.264 noise: every frame fresh random bytes, one keyframe a second."""
    import av

    with av.open(str(path), "w", format="mp4") as container:
        stream = container.add_stream(
            "libx264", rate=FPS, options={"preset": "ultrafast", "crf": "20", "g": str(FPS), "threads": "1"}
        )
        stream.width, stream.height, stream.pix_fmt = SIZE[0], SIZE[1], "yuv420p"
        for i in range(CLIP_SECONDS * FPS):
            frame = av.VideoFrame(SIZE[0], SIZE[1], "yuv420p")
            for plane in frame.planes:
                plane.update(os.urandom(plane.buffer_size))
            frame.pts = i
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def long_video(clip: Path, path: Path, target_bytes: int) -> dict:
    """The clip's packets copied again and again, timestamps shifted, whole GOPs, until just under target."""
    import av

    with av.open(str(clip)) as src:
        video = src.streams.video[0]
        gops: list[list] = []
        for packet in src.demux(video):
            if packet.dts is None:
                continue
            if packet.is_keyframe or not gops:
                gops.append([])
            gops[-1].append((bytes(packet), packet.pts, packet.dts, packet.duration, packet.is_keyframe))
        span = max(p[1] + (p[3] or 0) for gop in gops for p in gop)  # one copy's length, in its time base
        with av.open(str(path), "w", format="mp4") as out:
            stream = out.add_stream_from_template(video)
            # The packets carry their times in the clip's time base; let the muxer rescale.
            written, packets, shift, done = 0, 0, 0, False
            while not done:
                for gop in gops:
                    size = sum(len(p[0]) for p in gop)
                    if written + size + 2 * MIB > target_bytes:  # room for the moov
                        done = True
                        break
                    for data, pts, dts, duration, key in gop:
                        packet = av.Packet(data)
                        packet.pts, packet.dts, packet.duration = pts + shift, dts + shift, duration
                        packet.time_base = video.time_base
                        packet.is_keyframe = key
                        packet.stream = stream
                        out.mux(packet)
                        packets += 1
                    written += size
                shift += span
    with av.open(str(path)) as check:
        seconds = float(check.duration or 0) / 1_000_000
    return {"bytes": path.stat().st_size, "packets": packets, "seconds": r(seconds, 1)}


def bare(path: Path, work: Path) -> float:
    """Scan + probe + poster + remux of `path` in this process; seconds."""
    from processing.sandbox import Bounds
    from processing.sandbox import media as media_decoder
    from processing.scanners.yara import YaraScanner

    def chunks():
        with open(path, "rb") as fh:
            while block := fh.read(CHUNK):
                yield block

    work.mkdir(parents=True)
    scanner = YaraScanner(spool_dir=work, timeout=600)
    os.sync()  # the previous run's gigabytes written back first: each run starts on a quiet disk
    started = time.perf_counter()
    verdict = scanner.scan(chunks(), path=path)  # as the scan stage does: the local file, scanned in place
    assert not verdict.infected, verdict
    data, files = media_decoder.process(path, work, Bounds())
    elapsed = time.perf_counter() - started
    assert "served" in files and "poster" in files, files
    shutil.rmtree(work, ignore_errors=True)
    return elapsed


# The service's defaults for its own uploads (AIRLOCK_S3_TRANSFER_CHUNK_BYTES, AIRLOCK_S3_TRANSFER_THREADS).
TRANSFER_CHUNK, TRANSFER_THREADS = 16 * MIB, 4


def bare_transfer(moto, path: Path, work: Path) -> dict[str, float]:
    """The storage IO any implementation does for this file, bare: one download, one upload of its size.

    In this process, against the same moto server, as the worker does it: the object read
    in 1 MiB chunks into a local file (the service's one download, processing/spool.py),
    then a file of the remux's size (the original itself: the remux keeps every packet)
    uploaded with the service's part size and threads (the `served` derivative).
    """
    from boto3.s3.transfer import TransferConfig

    client = moto.client()
    config = TransferConfig(
        multipart_threshold=TRANSFER_CHUNK, multipart_chunksize=TRANSFER_CHUNK, max_concurrency=TRANSFER_THREADS
    )
    source = "bare/original.mp4"
    try:
        client.head_object(Bucket=moto.bucket, Key=source)
    except client.exceptions.ClientError:
        client.upload_file(str(path), moto.bucket, source, Config=config)  # once, not timed
    work.mkdir(parents=True)
    os.sync()
    started = time.perf_counter()
    body = client.get_object(Bucket=moto.bucket, Key=source)["Body"]
    with open(work / "original", "wb") as out:
        for chunk in body.iter_chunks(CHUNK):
            out.write(chunk)
    downloaded = time.perf_counter()
    client.upload_file(str(path), moto.bucket, "bare/served.mp4", Config=config)
    uploaded = time.perf_counter()
    client.delete_object(Bucket=moto.bucket, Key="bare/served.mp4")
    shutil.rmtree(work, ignore_errors=True)
    return {"download_s": downloaded - started, "upload_s": uploaded - downloaded}


def sha256_file(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def rss_anon_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def worker_pid(serve_pid: int) -> int:
    """serve's web process (gunicorn's one worker in the embedded shape): it runs the job threads."""
    children = Path(f"/proc/{serve_pid}/task/{serve_pid}/children").read_text().split()
    if len(children) != 1:
        raise RuntimeError(f"expected one web process under serve, found {children}")
    return int(children[0])


class RssSampler:
    def __init__(self, pid: int, every: float = 0.05) -> None:
        self.pid, self.every = pid, every
        self.start = rss_anon_kb(pid) or 0
        self.peak = self.start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            value = rss_anon_kb(self.pid)
            if value is not None:
                self.peak = max(self.peak, value)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return (self.peak - self.start) / 1024


def upload(base: str, token: str, path: Path) -> tuple[str, float]:
    """Intent + one streamed PUT; (attachment id, epoch seconds when the PUT returned)."""
    import requests

    auth = {"Authorization": f"Token {token}"}
    intent = requests.post(
        f"{base}/api/v1/uploads",
        headers=auth,
        timeout=60,
        json={"profile": "media", "filename": path.name, "size": path.stat().st_size, "content_type": "video/mp4"},
    )
    assert intent.status_code == 201, intent.text[:300]
    body = intent.json()
    with open(path, "rb") as fh:
        put = requests.put(body["upload"]["url"], data=fh, headers=body["upload"]["headers"], timeout=1800)
    done = time.time()
    assert put.status_code == 202, (put.status_code, put.text[:300])
    return body["id"], done


def upload_s3(base: str, token: str, path: Path) -> tuple[str, float]:
    """The intent's plan followed by the Python client, complete call included; (id, epoch when it answered)."""
    from airlock_client import Client

    with Client(base, token, timeout=1800) as client:
        # sha256=False: like the embedded PUT, no digest declared (it would be one more pass first).
        attachment = client.upload(path, profile="media", content_type="video/mp4", sha256=False, transport="intent")
        done = time.time()
    return attachment["id"], done


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--mib", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--s3", action="store_true", help="storage on moto's S3 server; figures get _s3")
    parser.add_argument(
        "--keep-logs",
        type=Path,
        default=None,  # moto.log's request times: where time went
        help="copy serve's (and moto's) log into this directory before the scratch dir goes",
    )
    args = parser.parse_args()
    target = (args.mib or (256 if args.quick else 1000)) * MIB
    rounds = args.rounds or (3 if args.quick else 5)

    tmp = scratch_dir("airlock-bench-video1g-")
    server = None
    moto = None
    send = upload_s3 if args.s3 else upload
    try:
        clip, video = tmp / "clip.mp4", tmp / "long.mp4"
        made = time.perf_counter()
        noise_clip(clip)
        facts = long_video(clip, video, target)
        make_s = time.perf_counter() - made

        data = tmp / "data"
        storage: dict[str, str] = {}
        if args.s3:
            moto = MotoServer(tmp, "video1g")
            storage = moto.s3_env()
        env = embedded_env(
            data, CLAMD_SOCKET=None, DJANGO_SETTINGS_MODULE="config.settings.base", TMPDIR=str(tmp), **storage
        )
        from processing.sandbox.warmup import preload

        preload()
        bare(clip, tmp / "bare-warm")  # imports, rules compiled, decoders warm

        migrate(env)
        token = createuser(env, "video")
        server = serve(env, tmp)
        web = worker_pid(server.proc.pid)
        wait_ready(server.base, token, send(server.base, token, clip)[0])  # warm-up: the same path, small
        # bare, ours, bare, ours, ..., bare: each of ours against the mean of the bare runs around it.
        bares = [bare(video, tmp / "bare-0")]
        # S3: the bare download + upload of the same bytes, after each bare run (none in embedded mode).
        transfers = [bare_transfer(moto, video, tmp / "transfer-0")] if moto is not None else []
        ours_s, growths, starts, ratios = [], [], [], []
        for n in range(rounds):
            os.sync()  # as before a bare run; the PUT's own writeback stays in the time, it is the service's
            sampler = RssSampler(web)
            attachment_id, put_done = send(server.base, token, video)
            body = wait_ready(server.base, token, attachment_id)
            growths.append(sampler.stop())
            starts.append(sampler.start / 1024)
            meta = body.get("metadata") or {}
            # Probed, poster and thumbnail made: the media step ran, it was not skipped.
            assert meta.get("duration_seconds") and meta.get("video_codec") == "h264", meta
            assert {"poster", "thumbnail"} <= set(body.get("derivatives") or {}), body.get("derivatives")
            ours_s.append(datetime.fromisoformat(body["ready_at"].replace("Z", "+00:00")).timestamp() - put_done)
            bares.append(bare(video, tmp / f"bare-{n + 1}"))
            ratios.append(ours_s[-1] / ((bares[-2] + bares[-1]) / 2))
            if moto is not None:
                transfers.append(bare_transfer(moto, video, tmp / f"transfer-{n + 1}"))
        server.stop()
        server = None
        if moto is not None:
            moto.stop()
            moto = None
        # Info: one SHA-256 pass over a file this size, work the service does beyond the bare
        # steps (it hashes the served copy it stores); the bare steps do not include it.
        os.sync()
        sha_s = timed(lambda: sha256_file(video))

        suffix = "_s3" if args.s3 else ""
        storage_io: dict = {}
        if transfers:
            # Paired like the ratio: each of ours against the bare steps + bare transfers around it.
            moved = [t["download_s"] + t["upload_s"] for t in transfers]
            with_io = [ours_s[n] / ((bares[n] + moved[n] + bares[n + 1] + moved[n + 1]) / 2) for n in range(rounds)]
            without_io = [
                (ours_s[n] - (moved[n] + moved[n + 1]) / 2) / ((bares[n] + bares[n + 1]) / 2) for n in range(rounds)
            ]
            storage_io = {
                f"video_1gib_pipeline_vs_bare_steps_plus_transfer_ratio{suffix}": r(median(with_io)),
                f"video_1gib_pipeline_minus_transfer_vs_bare_steps_ratio{suffix}": r(median(without_io)),
            }
        mode = (
            "S3 on moto_server (multipart plan + complete, by airlock_client), SQLite, in-process broker"
            if args.s3
            else "embedded (SQLite, in-process broker, local storage)"
        )
        emit(
            {
                f"video_1gib_pipeline_vs_bare_steps_ratio{suffix}": r(median(ratios)),
                f"video_1gib_worker_rss_growth_mb{suffix}": r(max(growths), 1),
                **storage_io,
                f"video_1gib{suffix}": {
                    "file_bytes": facts["bytes"],
                    "file_mib": r(facts["bytes"] / MIB, 1),
                    "video_seconds": facts["seconds"],
                    "packets": facts["packets"],
                    "frame": f"{SIZE[0]}x{SIZE[1]} H.264 noise {FPS} fps",
                    "rounds": rounds,
                    "ratios": [r(x) for x in ratios],
                    "pipeline_upload_complete_to_ready_s": r(median(ours_s), 2),
                    "pipeline_runs_s": [r(x, 2) for x in ours_s],
                    "bare_scan_probe_poster_remux_s": r(median(bares), 2),
                    "bare_runs_s": [r(x, 2) for x in bares],
                    "sha256_pass_s": r(sha_s, 2),
                    **(
                        {
                            "bare_download_s": [r(t["download_s"], 2) for t in transfers],
                            "bare_upload_s": [r(t["upload_s"], 2) for t in transfers],
                            "transfer_part_mib_threads": [TRANSFER_CHUNK // MIB, TRANSFER_THREADS],
                        }
                        if transfers
                        else {}
                    ),
                    "worker_rss_growth_runs_mb": [r(x, 1) for x in growths],
                    "worker_rss_anon_start_mb": r(min(starts), 1),
                    "file_made_s": r(make_s, 1),
                    "mode": f"{mode}, YARA only",
                    "quick": args.quick,
                },
            }
        )
    finally:
        if server is not None:
            server.stop()
        if moto is not None:
            moto.stop()
        if args.keep_logs is not None:
            args.keep_logs.mkdir(parents=True, exist_ok=True)
            for log in tmp.glob("*.log"):
                shutil.copy(log, args.keep_logs / log.name)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
