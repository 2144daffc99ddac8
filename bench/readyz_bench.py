#!/usr/bin/env python
"""/readyz under 30 concurrent clients on PostgreSQL + Redis + S3 (moto): p99, and never a 503 when healthy.

    python bench/readyz_bench.py [--quick] [--clients 30] [--requests 20]

`manage.py serve` with its default sizing (web processes, job process) on PostgreSQL (a
scratch database) + Redis + clamd (when it answers), storage on moto's S3 server (its own
process, over HTTP), as bench/burst_s3.py. Every dependency is up: a 503 is a healthy
instance a load balancer would drop.

Once three probes a second apart said ready (a load balancer's healthy threshold),
--clients load balancers each send --requests `GET /readyz` back to back on a keep-alive
connection, all released together; one more client polls `GET /healthz` meanwhile.

  readyz_p99_s           99th percentile of one /readyz request (goal ≤ 0.2 s)
  readyz_503             /readyz answers that were 503 (goal 0)
  readyz.healthz_p99_s   /healthz beside them (info)
--quick changes nothing: 30 × 20 is the figure's definition.
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.api import Database  # noqa: E402
from bench.common import MotoServer, emit, median, migrate, percentile, r, scratch_dir, serve  # noqa: E402
from bench.serve_bench import redis_ok, service_env  # noqa: E402


def main() -> None:
    import requests

    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--clients", type=int, default=30)
    parser.add_argument("--requests", type=int, default=20)
    args = parser.parse_args()
    tmp = scratch_dir("airlock-bench-readyz-")
    db = Database(tmp)
    if not (db.pg and redis_ok()):
        db.drop()
        raise SystemExit("the readyz bench needs PostgreSQL and Redis")
    moto = MotoServer(tmp, "readyz")
    server = None
    try:
        env = service_env(tmp, db, **moto.s3_env())
        migrate(env)
        server = serve(env, tmp)
        base = server.base
        for _ in range(3):  # a load balancer's healthy threshold: 3 good probes, a second apart
            first = requests.get(f"{base}/readyz", timeout=30)
            if first.status_code != 200:
                raise RuntimeError(f"not ready before the load: {first.status_code} {first.text[:500]}")
            time.sleep(1.0)

        durations: list[float] = []
        statuses: dict[int, int] = {}
        healthz: list[float] = []
        lock = threading.Lock()
        start = threading.Barrier(args.clients + 1)
        done = threading.Event()

        def balancer() -> None:
            with requests.Session() as session:
                start.wait()
                for _ in range(args.requests):
                    began = time.perf_counter()
                    got = session.get(f"{base}/readyz", timeout=30)
                    took = time.perf_counter() - began
                    with lock:
                        durations.append(took)
                        statuses[got.status_code] = statuses.get(got.status_code, 0) + 1

        def liveness() -> None:
            with requests.Session() as session:
                start.wait()
                while not done.is_set():
                    began = time.perf_counter()
                    session.get(f"{base}/healthz", timeout=30).raise_for_status()
                    healthz.append(time.perf_counter() - began)
                    time.sleep(0.02)

        threads = [threading.Thread(target=balancer) for _ in range(args.clients)]
        watcher = threading.Thread(target=liveness)
        began = time.perf_counter()
        for thread in [*threads, watcher]:
            thread.start()
        for thread in threads:
            thread.join()
        seconds = time.perf_counter() - began
        done.set()
        watcher.join()
    finally:
        if server is not None:
            server.stop()
        moto.stop()
        db.drop()
    emit(
        {
            "readyz_p99_s": r(percentile(durations, 99), 3),
            "readyz_503": statuses.get(503, 0),
            "readyz": {
                "p50_s": r(median(durations), 4),
                "max_s": r(max(durations), 3),
                "requests": len(durations),
                "clients": args.clients,
                "seconds": r(seconds, 2),
                "statuses": {str(k): v for k, v in sorted(statuses.items())},
                "healthz_p99_s": r(percentile(healthz, 99), 3) if healthz else None,
                "setup": "serve defaults on PostgreSQL + Redis (+ clamd when it answers), S3 on moto_server, "
                "base settings; 30 keep-alive clients x 20 GET /readyz released together, one /healthz poller",
            },
        }
    )


if __name__ == "__main__":
    main()
