#!/usr/bin/env python
"""Named variants under `serve`: a cold `medium` of a 12 MP photo, warm variants vs downloads, single flight.

    .venv/bin/python bench/variant_bench.py [--quick] [--photos N] [--rounds R]

Starts `manage.py serve` (web, worker, scheduler) on the environment it is given
(bench/run.py: the embedded defaults, SQLite and local storage), uploads N camera-like
12 MP JPEGs (bench/common.photo_jpeg, 4000 × 3000) and waits for them to be ready.

- variant_cold_p99_s: each photo's first `GET …/variants/medium` (Accept: WebP, as a
  browser's <img>), from the request to the last byte: the sandboxed decode, resize and
  encode, the store, the answer. p99 is nearest-rank (the slowest of fewer than 100).
  Goal ≤ 0.5 s on the embedded default.
- variant_warm_vs_download_ratio: a made `medium` variant fetched again vs the download of
  a file of exactly the same size (a stored ZIP padded to it: `archive` serves its
  original), same server, same session, interleaved in shuffled order
  (bench/common.paired_rounds): download seconds ÷ variant seconds = the variant's
  throughput ÷ the download's. Goal ≥ 0.9.
- variant_single_flight_generations: 50 concurrent requests (a connection each, released
  together) for one cold `large` variant of a fresh photo: how many generations the
  server counted (`airlock_variant_generations_total{outcome="made"}` on /metrics, before
  and after). Goal = 1; every answer 200 with one ETag.

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import sys
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from threading import Barrier

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.common import (  # noqa: E402
    createuser,
    emit,
    local_env,
    median,
    paired_rounds,
    percentile,
    photo_jpeg,
    r,
    scratch_dir,
    serve,
    wait_ready,
)
from tests.support.processes import api_upload  # noqa: E402

WEBP = "image/avif,image/webp,image/apng,image/*,*/*;q=0.8"
CONCURRENT = 50
_MADE = re.compile(r'^airlock_variant_generations_total\{outcome="made"\} ([0-9.e+]+)$', re.M)


def zip_of_size(size: int) -> bytes:
    """A ZIP of exactly `size` bytes: one stored entry of incompressible bytes."""

    def build(payload: int) -> bytes:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as archive:
            archive.writestr("data.bin", os.urandom(payload))
        return buf.getvalue()

    overhead = len(build(0))
    data = build(size - overhead)
    assert len(data) == size, (len(data), size)
    return data


def generations(base: str) -> float:
    import requests

    page = requests.get(f"{base}/metrics", timeout=30)
    page.raise_for_status()
    found = _MADE.search(page.text)
    return float(found.group(1)) if found else 0.0


def main() -> None:
    import requests

    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--photos", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    args = parser.parse_args()
    photos = args.photos or (6 if args.quick else 20)
    rounds = args.rounds or (5 if args.quick else 9)

    tmp = scratch_dir("variant-bench-")
    env = local_env(tmp, AIRLOCK_METRICS={"open": 1})  # the generations counter, read before and after the race
    server = serve(env, tmp)
    base = server.base
    try:
        token = createuser(env, "bench")
        auth = {"Authorization": f"Token {token}"}
        ids = [
            api_upload(
                base,
                token,
                photo_jpeg(seed),
                profile="image",
                filename=f"photo-{seed}.jpg",
                content_type="image/jpeg",
                timeout=120,
            )
            for seed in range(photos + 1)
        ]
        bodies = [wait_ready(base, token, attachment_id, timeout=300, poll=20) for attachment_id in ids]
        flight, bodies = bodies[-1], bodies[:-1]

        # Cold: each photo's first medium, over a warm connection (the first request of the run warms imports).
        session = requests.Session()
        session.headers.update(auth)
        session.get(f"{base}/api/v1/attachments/{ids[0]}/variants/small", headers={"Accept": WEBP}).raise_for_status()
        cold = []
        for body in bodies:
            started = time.perf_counter()
            got = session.get(f"{base}/api/v1/attachments/{body['id']}/variants/medium", headers={"Accept": WEBP})
            got.raise_for_status()
            cold.append(time.perf_counter() - started)
        variant_bytes = len(got.content)

        # Warm vs a download of the same size.
        archive = api_upload(
            base,
            token,
            zip_of_size(variant_bytes),
            profile="archive",
            filename="same-size.zip",
            content_type="application/zip",
            timeout=120,
        )
        wait_ready(base, token, archive, timeout=300, poll=20)
        variant_url = f"{base}/api/v1/attachments/{bodies[-1]['id']}/variants/medium"
        download_url = f"{base}/api/v1/attachments/{archive}/download"

        def fetch(url: str, accept: str) -> None:
            got = session.get(url, headers={"Accept": accept})
            got.raise_for_status()
            if len(got.content) != variant_bytes:
                raise RuntimeError(f"{url}: {len(got.content)} bytes, not {variant_bytes}")

        per_round = paired_rounds(
            {"variant": lambda _: fetch(variant_url, WEBP), "download": lambda _: fetch(download_url, "*/*")},
            [Path("medium")] * 20,
            rounds,
        )
        ratios = [d / v for d, v in zip(per_round["download"], per_round["variant"], strict=True)]

        # Single flight: 50 connections released together on one cold variant (signed link, no header).
        link = flight["links"]["variants"]["large"]
        before = generations(base)
        start = Barrier(CONCURRENT)

        def racer(_: int) -> tuple[int, str | None]:
            with requests.Session() as own:
                start.wait()
                answer = own.get(link, headers={"Accept": WEBP}, timeout=120)
            return answer.status_code, answer.headers.get("ETag")

        with ThreadPoolExecutor(CONCURRENT) as pool:
            answers = list(pool.map(racer, range(CONCURRENT)))
        made = generations(base) - before

        emit(
            {
                "variant_cold_p99_s": r(percentile(cold, 99)),
                "variant_cold_p50_s": r(median(cold)),
                "variant_cold_photos": len(cold),
                "variant_medium_bytes": variant_bytes,
                "variant_warm_vs_download_ratio": r(median(ratios)),
                "variant_warm_ms": r(median(per_round["variant"]) * 1000, 2),
                "variant_download_ms": r(median(per_round["download"]) * 1000, 2),
                "variant_warm_rounds": rounds,
                "variant_single_flight_generations": int(made),
                "variant_single_flight_statuses": sorted({status for status, _ in answers}),
                "variant_single_flight_etags": len({etag for _, etag in answers}),
            }
        )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
