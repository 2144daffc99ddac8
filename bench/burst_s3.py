#!/usr/bin/env python
"""A burst of 200 S3 uploads at once, on a busy machine: every one must succeed.

    python bench/burst_s3.py [--quick] [--clients 200] [--hogs 2]

`manage.py serve` with its default sizing (web processes, threads, pool) on
PostgreSQL (a scratch database) + Redis + clamd (when it answers), storage on
moto's S3 server (its own process, over HTTP, like tests/s3). While --hogs
processes keep the cores busy, --clients guests (10 users) start together,
each: intent -> POST to the bucket -> complete -> status, over HTTP with
tests/s3/support.upload_burst (the same client as tests/e2e/test_burst_s3.py).

  burst_s3_200_clients_ok_ratio  clients whose four steps all succeeded / clients (goal 1.0:
                                 slower is acceptable, a 503 is not)
  burst_s3_200_clients_p99_s     99th percentile of one client's time, intent to status answered
  burst_s3.pg_connections_peak   connections to the scratch database (pg_stat_activity, sampled 4/s):
                                 serve's pools together, against PostgreSQL's max_connections
--quick changes nothing: 200 clients are the figure's definition.
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.api import Database  # noqa: E402
from bench.common import (  # noqa: E402
    MotoServer,
    createuser,
    emit,
    migrate,
    percentile,
    r,
    scratch_dir,
    serve,
)
from bench.serve_bench import pg_connections, redis_ok, service_env  # noqa: E402
from tests.s3.support import cpu_hogs, stop_all, upload_burst  # noqa: E402
from tests.support import jpeg_bytes  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--hogs", type=int, default=2)
    args = parser.parse_args()
    tmp = scratch_dir("airlock-bench-burst-")
    db = Database(tmp)
    if not (db.pg and redis_ok()):
        db.drop()
        raise SystemExit("the burst needs PostgreSQL and Redis")
    moto = MotoServer(tmp, "burst")
    server = None
    hogs: list[subprocess.Popen] = []
    try:
        env = service_env(tmp, db, **moto.s3_env())
        migrate(env)
        tokens = [createuser(env, f"guest{i}") for i in range(10)]
        server = serve(env, tmp)
        peak = [0]
        sampled = threading.Event()

        def sample() -> None:
            while not sampled.wait(0.25):
                peak[0] = max(peak[0], pg_connections(db))

        sampler = threading.Thread(target=sample)
        sampler.start()
        hogs = cpu_hogs(args.hogs)
        try:
            burst = upload_burst(server.base, tokens, args.clients, jpeg_bytes((320, 240)))
        finally:
            sampled.set()
            sampler.join()
    finally:
        stop_all(hogs)
        if server is not None:
            server.stop()
        moto.stop()
        db.drop()
    refusals = sum(n for step, n in burst.statuses.items() if step.endswith(" 503"))
    emit(
        {
            "burst_s3_200_clients_ok_ratio": r(len(burst.durations) / args.clients, 4),
            "burst_s3_200_clients_p99_s": r(percentile(burst.durations, 99), 2) if burst.durations else None,
            "burst_s3": {
                "clients": args.clients,
                "cpu_hogs": args.hogs,
                "seconds": r(burst.seconds, 1),
                "p50_s": r(percentile(burst.durations, 50), 2) if burst.durations else None,
                "responses_503": refusals,
                "pg_connections_peak": peak[0],
                "statuses": burst.statuses,
                "failures_sample": burst.failures[:3],
                "setup": "serve defaults on PostgreSQL + Redis + clamd, S3 on moto_server; "
                "intent -> POST to the bucket -> complete -> status per client",
            },
        }
    )


if __name__ == "__main__":
    main()
