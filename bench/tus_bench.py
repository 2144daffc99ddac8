#!/usr/bin/env python
"""tus upload throughput against a single PUT of the same file, same server, same run.

    .venv/bin/python bench/tus_bench.py [--quick] [--mib N] [--rounds R]

Starts `manage.py serve --no-worker --no-scheduler` on the environment it is given
(bench/run.py: the embedded defaults, SQLite and local storage) so that only the
upload path is timed, not processing. Each round uploads one N MiB file (profile
`media`) twice, in alternating order: once as an intent plus one signed PUT (requests),
once through tus with a real client (tuspy) in 5 MiB PATCHes, each from the first
request to the last answer. tus_vs_put_throughput_ratio is the median over rounds of
PUT seconds ÷ tus seconds (tus throughput ÷ PUT throughput). Prints one JSON line.
Goal: >= 0.8.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.common import createuser, emit, local_env, median, r, scratch_dir, serve  # noqa: E402

MIB = 1 << 20
CHUNK = 5 * MIB
MP4_HEAD = b"\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom"


def put_upload(base: str, token: str, data: bytes) -> float:
    import requests

    auth = {"Authorization": f"Token {token}"}
    started = time.perf_counter()
    intent = requests.post(
        f"{base}/api/v1/uploads",
        headers=auth,
        timeout=60,
        json={"profile": "media", "filename": "bench.mp4", "size": len(data), "content_type": "video/mp4"},
    )
    intent.raise_for_status()
    upload = intent.json()["upload"]
    sent = requests.put(upload["url"], data=data, headers=upload["headers"], timeout=600)
    sent.raise_for_status()
    return time.perf_counter() - started


def tus_upload(base: str, token: str, path: Path, size: int) -> float:
    from tusclient.client import TusClient

    client = TusClient(f"{base}/api/v1/tus/", headers={"Authorization": f"Token {token}"})
    started = time.perf_counter()
    uploader = client.uploader(
        str(path), chunk_size=CHUNK, metadata={"profile": "media", "filename": "bench.mp4", "content_type": "video/mp4"}
    )
    uploader.upload()
    elapsed = time.perf_counter() - started
    if uploader.offset != size:
        raise RuntimeError(f"tus upload ended at {uploader.offset} of {size}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--mib", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    args = parser.parse_args()
    mib = args.mib or (30 if args.quick else 100)
    rounds = args.rounds or (5 if args.quick else 7)

    tmp = scratch_dir("tus-bench-")
    env = local_env(tmp)
    server = serve(env, tmp, "--no-worker", "--no-scheduler")
    base = server.base
    try:
        token = createuser(env, "bench")
        data = MP4_HEAD + os.urandom(mib * MIB - len(MP4_HEAD))
        path = tmp / "bench.mp4"
        path.write_bytes(data)
        put_upload(base, token, data[: 6 * MIB])  # warm both paths up (imports, first connections)
        warm = tmp / "warm.mp4"
        warm.write_bytes(data[: 6 * MIB])
        tus_upload(base, token, warm, 6 * MIB)
        puts, tuses, ratios = [], [], []
        for n in range(rounds):
            if n % 2 == 0:
                put_s = put_upload(base, token, data)
                tus_s = tus_upload(base, token, path, len(data))
            else:
                tus_s = tus_upload(base, token, path, len(data))
                put_s = put_upload(base, token, data)
            puts.append(put_s)
            tuses.append(tus_s)
            ratios.append(put_s / tus_s)
        emit(
            {
                "tus_vs_put_throughput_ratio": r(median(ratios)),
                "tus_upload_mib_per_s": r(mib / median(tuses), 1),
                "tus_put_mib_per_s": r(mib / median(puts), 1),
                "tus_file_mib": mib,
                "tus_chunk_mib": CHUNK // MIB,
                "tus_rounds": rounds,
                "tus_ratios": [r(x) for x in ratios],
            }
        )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
