#!/usr/bin/env python
"""Another tenant's cold variant while one tenant floods the server with 36 distinct cold variants.

    .venv/bin/python bench/variant_flood_bench.py [--quick] [--photos N]

Starts `manage.py serve` (web, worker, scheduler) on the environment it is given
(bench/run.py: the embedded defaults, SQLite and local storage) with its default
limits (AIRLOCK_VARIANT_CONCURRENCY, AIRLOCK_TENANT_CONCURRENCY). Tenant `flood`
uploads six 7000 × 5000 PNGs (one picture, six files: a text chunk differs);
tenant `other` uploads N camera-like 12 MP JPEGs (bench/common.photo_jpeg).

Then 36 clients of `flood` ask at once for every variant of its six PNGs (3 sizes
× WebP and JPEG), each retrying after `Retry-After` on a 503 as a browser does,
until all 36 are made; meanwhile `other` asks for each of its photos' cold `medium`,
one after another, as one viewer would (also retrying on a 503).

- variant_flood_other_tenant_p99_s: `other`'s request to last byte, retries included;
  p99 is nearest-rank (the slowest of fewer than 100). Goal ≤ 1.0 s.
- variant_flood.*: the flood's own figures: 503s answered to each tenant, seconds until
  all 36 were made, the server's processes (its sandbox children) and their RSS, sampled
  10 times a second, before and at the peak of the flood.

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import io
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
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
from bench.serve_bench import tree  # noqa: E402
from tests.support.processes import api_upload  # noqa: E402

WEBP = "image/avif,image/webp,image/apng,image/*,*/*;q=0.8"
JPEG = "image/jpeg,image/*;q=0.8"
FLOOD_SIZE = (7000, 5000)
FLOOD_FILES = 6
NAMES = ("small", "medium", "large")
GIVE_UP_SECONDS = 600


def flood_pngs(n: int) -> list[bytes]:
    """n distinct PNG files of one 7000 × 5000 picture (gradients and shapes, a little noise)."""
    from PIL import Image, PngImagePlugin

    picture = Image.open(io.BytesIO(photo_jpeg(0, size=(FLOOD_SIZE[0] // 4, FLOOD_SIZE[1] // 4)))).resize(
        FLOOD_SIZE, Image.Resampling.BICUBIC
    )
    files = []
    for i in range(n):
        info = PngImagePlugin.PngInfo()
        info.add_text("Comment", f"flood file {i}")
        buf = io.BytesIO()
        picture.save(buf, "PNG", compress_level=1, pnginfo=info)
        files.append(buf.getvalue())
    return files


def get_like_a_browser(session, url: str, accept: str, refusals: list[int]) -> float:
    """GET until 200, sleeping Retry-After after each 503; seconds from the first request to the last byte."""
    started = time.perf_counter()
    while True:
        got = session.get(url, headers={"Accept": accept}, timeout=120)
        if got.status_code == 200:
            return time.perf_counter() - started
        if got.status_code != 503 or time.perf_counter() - started > GIVE_UP_SECONDS:
            raise RuntimeError(f"{url}: {got.status_code} {got.text[:300]}")
        refusals.append(1)
        time.sleep(float(got.headers.get("Retry-After", "1")))


def processes_and_rss_mb(pid: int) -> tuple[int, float]:
    pids, rss_pages = tree(pid), 0
    for p in pids:
        try:
            rss_pages += int(Path(f"/proc/{p}/statm").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    import resource

    return len(pids), rss_pages * resource.getpagesize() / 2**20


def main() -> None:
    import requests

    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--photos", type=int, default=None)
    args = parser.parse_args()
    photos = args.photos or (8 if args.quick else 20)

    tmp = scratch_dir("variant-flood-bench-")
    env = local_env(tmp)
    server = serve(env, tmp)
    base = server.base
    try:
        flood_token, other_token = createuser(env, "flooder", "flood"), createuser(env, "viewer", "other")
        flood_ids = [
            api_upload(
                base, flood_token, data, profile="image", filename=f"big-{i}.png", content_type="image/png", timeout=300
            )
            for i, data in enumerate(flood_pngs(FLOOD_FILES))
        ]
        other_ids = [
            api_upload(
                base,
                other_token,
                photo_jpeg(seed),
                profile="image",
                filename=f"photo-{seed}.jpg",
                content_type="image/jpeg",
                timeout=120,
            )
            for seed in range(photos + 1)
        ]
        for token, ids in ((flood_token, flood_ids), (other_token, other_ids)):
            for attachment_id in ids:
                wait_ready(base, token, attachment_id, timeout=600, poll=20)
        warm, other_ids = other_ids[0], other_ids[1:]

        viewer = requests.Session()
        viewer.headers["Authorization"] = f"Token {other_token}"
        viewer.get(f"{base}/api/v1/attachments/{warm}/variants/small", headers={"Accept": WEBP}).raise_for_status()

        before = processes_and_rss_mb(server.proc.pid)
        peak = list(before)
        sampling = threading.Event()

        def sample() -> None:
            while not sampling.wait(0.1):
                count, rss = processes_and_rss_mb(server.proc.pid)
                peak[0], peak[1] = max(peak[0], count), max(peak[1], rss)

        sampler = threading.Thread(target=sample)
        sampler.start()
        flood_refusals: list[int] = []
        wanted = [(i, name, accept) for i in flood_ids for name in NAMES for accept in (WEBP, JPEG)]
        start = threading.Barrier(len(wanted))
        flood_started = time.perf_counter()

        def flood(job: tuple[str, str, str]) -> float:
            attachment_id, name, accept = job
            with requests.Session() as own:
                own.headers["Authorization"] = f"Token {flood_token}"
                start.wait()
                return get_like_a_browser(
                    own, f"{base}/api/v1/attachments/{attachment_id}/variants/{name}", accept, flood_refusals
                )

        other_refusals: list[int] = []
        with ThreadPoolExecutor(len(wanted)) as pool:
            flooding = pool.map(flood, wanted)
            time.sleep(1.0)  # the flood holds every slot it can get
            cold = [
                get_like_a_browser(viewer, f"{base}/api/v1/attachments/{a}/variants/medium", WEBP, other_refusals)
                for a in other_ids
            ]
            other_done = time.perf_counter() - flood_started
            flood_times = list(flooding)
        flood_seconds = time.perf_counter() - flood_started
        sampling.set()
        sampler.join()

        emit(
            {
                "variant_flood_other_tenant_p99_s": r(percentile(cold, 99)),
                "variant_flood_other_tenant_p50_s": r(median(cold)),
                "variant_flood": {
                    "other_photos": len(cold),
                    "other_503": len(other_refusals),
                    "other_done_while_flooding": other_done < flood_seconds,
                    "flood_variants": len(wanted),
                    "flood_503": len(flood_refusals),
                    "flood_seconds": r(flood_seconds, 1),
                    "flood_slowest_s": r(max(flood_times), 1),
                    "processes_before": before[0],
                    "processes_peak": peak[0],
                    "rss_mb_before": r(before[1], 0),
                    "rss_mb_peak": r(peak[1], 0),
                    "setup": "serve on the embedded default (SQLite, local storage, in-process worker), default "
                    "variant and tenant limits; flood: 6 PNGs 7000x5000 x 3 sizes x WebP/JPEG at once, "
                    "retrying after Retry-After; other tenant: 12 MP JPEG, cold medium WebP, one at a time",
                },
            }
        )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
