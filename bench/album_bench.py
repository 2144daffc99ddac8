#!/usr/bin/env python
"""A ref's album as one ZIP (`GET /api/v1/refs/{ref}/archive`) against reading the same files, same run.

    .venv/bin/python bench/album_bench.py [--quick] [--mib N] [--rounds R]

Starts `manage.py serve` on the environment it is given (bench/run.py: the embedded
defaults, SQLite and local storage, the worker inside the one web process), uploads
camera-like 12 MP JPEGs (bench/common.photo_jpeg; a few distinct pictures, each copy
made unique by a JPEG comment the pipeline strips) until about N MiB are stored
(1000; 200 with --quick), waits for them to be ready and commits them to one ref.

- album_zip_vs_disk_read_ratio: the archive fetched over a warm loopback connection
  and read to the end in 1 MiB pieces (requests' iter_content), against reading the
  same served files from the storage directory in 1 MiB reads in this process:
  the archive's bytes/s ÷ the files' bytes/s. Before every run of either side the
  files' pages are dropped from the page cache (os.sync, then posix_fadvise
  DONTNEED on each file: no privileges needed), so both read from the disk, as the
  first download of an album does. Rounds interleaved (disk, zip, disk, …); each zip
  run is compared with the mean of the disk runs around it; the median is reported.
  Goal ≥ 0.7.
- album_zip.warm_ratio (info): the same with the files in the page cache on both
  sides: there the baseline is memcpy speed (GB/s), so the figure is what HTTP, the
  ZIP framing and a Python client cost against no IO at all.
- album_zip_worker_rss_growth_mb: RssAnon of serve's web process (the one that
  streams the archive), sampled every 50 ms from just before each archive request
  to its last byte, peak - start, the largest over rounds. Goal < 64.

The machine is shared: `load_average` (1, 5, 15 min, at the start and the end) is
printed beside the figures.

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.common import createuser, emit, local_env, median, photo_jpeg, r, scratch_dir, serve, wait_ready  # noqa: E402
from bench.video1g_bench import RssSampler, worker_pid  # noqa: E402
from tests.support.processes import api_upload  # noqa: E402

CHUNK = 1 << 20
DISTINCT = 4  # photo_jpeg is slow (seconds each on a loaded machine): copies made unique instead


def unique_copy(jpeg: bytes, n: int) -> bytes:
    """The same picture with a COM segment naming `n` right after SOI: other bytes, the same pixels."""
    text = f"album-bench copy {n}".encode()
    return jpeg[:2] + b"\xff\xfe" + (len(text) + 2).to_bytes(2, "big") + text + jpeg[2:]


def read_files(paths: list[Path]) -> int:
    total = 0
    for path in paths:
        with open(path, "rb", buffering=0) as fh:
            while block := fh.read(CHUNK):
                total += len(block)
    return total


def evict(paths: list[Path]) -> None:
    """Drop the files' pages from the page cache, so the next read comes from the disk."""
    os.sync()
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def main() -> None:
    import requests

    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--mib", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    args = parser.parse_args()
    target = (args.mib or (200 if args.quick else 1000)) << 20
    rounds = args.rounds or (3 if args.quick else 5)
    load_start = os.getloadavg()

    tmp = scratch_dir("album-bench-")
    env = local_env(tmp)
    pictures = [photo_jpeg(seed) for seed in range(DISTINCT)]
    server = serve(env, tmp)
    base = server.base
    try:
        token = createuser(env, "bench")
        auth = {"Authorization": f"Token {token}"}
        ids: list[str] = []
        uploaded = 0
        while uploaded < target:
            data = unique_copy(pictures[len(ids) % DISTINCT], len(ids))
            ids.append(
                api_upload(
                    base,
                    token,
                    data,
                    profile="image",
                    filename=f"IMG_{len(ids):04d}.jpg",
                    content_type="image/jpeg",
                    timeout=120,
                )
            )
            uploaded += len(data)
        for attachment_id in ids:
            wait_ready(base, token, attachment_id, timeout=1800, poll=30)
        committed = requests.post(
            f"{base}/api/v1/attachments/commit", headers=auth, json={"ids": ids, "ref": "album"}, timeout=300
        )
        committed.raise_for_status()

        # The served files, as the archive reads them (the storage gateway's path for each served key).
        with sqlite3.connect(Path(env["AIRLOCK_DATA_DIR"]) / "airlock.sqlite3") as db:
            keys = [k for (k,) in db.execute("SELECT served_key FROM attachments_attachment WHERE ref = 'album'")]
        storage = Path(env["AIRLOCK_STORAGE_ROOT"])
        paths = [storage / key for key in keys]
        file_bytes = sum(p.stat().st_size for p in paths)

        session = requests.Session()
        session.headers.update(auth)
        web = worker_pid(server.proc.pid)

        def fetch_zip() -> tuple[int, float]:
            sampler = RssSampler(web)
            total = 0
            with session.get(f"{base}/api/v1/refs/album/archive", stream=True, timeout=1800) as got:
                got.raise_for_status()
                for block in got.iter_content(CHUNK):
                    total += len(block)
            return total, sampler.stop()

        fetch_zip()  # warm: imports, the connection
        runs: dict[str, dict[str, list[float]]] = {}
        growths: list[float] = []
        zip_bytes = 0
        for mode in ("cold", "warm"):
            disk: list[float] = []
            zips: list[float] = []
            runs[mode] = {"disk": disk, "zip": zips}

            def disk_run(mode: str = mode, disk: list[float] = disk) -> None:
                if mode == "cold":
                    evict(paths)
                started = time.perf_counter()
                read_files(paths)
                disk.append(time.perf_counter() - started)

            disk_run()
            for _ in range(rounds):
                if mode == "cold":
                    evict(paths)
                started = time.perf_counter()
                zip_bytes, growth = fetch_zip()
                zips.append(time.perf_counter() - started)
                growths.append(growth)
                disk_run()

        def ratios(mode: str) -> list[float]:
            disk, zips = runs[mode]["disk"], runs[mode]["zip"]
            # throughputs: bytes/s of the archive ÷ bytes/s of the files
            return [(zip_bytes / z) / (file_bytes / ((disk[i] + disk[i + 1]) / 2)) for i, z in enumerate(zips)]

        cold, warm = runs["cold"], runs["warm"]
        emit(
            {
                "album_zip_vs_disk_read_ratio": r(median(ratios("cold"))),
                "album_zip_worker_rss_growth_mb": r(max(growths), 1),
                "album_zip": {
                    "files": len(paths),
                    "file_mib": r(file_bytes / 2**20, 1),
                    "zip_mib": r(zip_bytes / 2**20, 1),
                    "cold_zip_mib_per_s": r(median([zip_bytes / z / 2**20 for z in cold["zip"]]), 1),
                    "cold_disk_mib_per_s": r(median([file_bytes / d / 2**20 for d in cold["disk"]]), 1),
                    "cold_ratios": [r(x) for x in ratios("cold")],
                    "warm_ratio": r(median(ratios("warm"))),
                    "warm_zip_mib_per_s": r(median([zip_bytes / z / 2**20 for z in warm["zip"]]), 1),
                    "warm_disk_mib_per_s": r(median([file_bytes / d / 2**20 for d in warm["disk"]]), 1),
                    "rss_growth_runs_mb": [r(x, 1) for x in growths],
                    "rounds": rounds,
                    "load_average_start": [round(x, 2) for x in load_start],
                    "load_average_end": [round(x, 2) for x in os.getloadavg()],
                },
            }
        )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
