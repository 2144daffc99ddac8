#!/usr/bin/env python
"""Each speed trick on and off, same figure, one run.

    .venv/bin/python bench/tricks_bench.py [--quick] [--only api,sandbox]

api: PostgreSQL scratch database prepared by bench/api_setup.py, Django set up in
this process with the production pool (config.postgresql, CONN_HEALTH_CHECKS),
Redis cache when REDIS_URL is set; requests go through Django's test client (the
whole middleware, DRF and ORM stack, no HTTP server). For each figure, every
variant ("on": every trick on; "-name": bench/switches.py's off(name)) runs a batch
of requests in shuffled order within each round (bench/common.py's pairing), so
load from the shared machine hits all alike. Per variant: wall ms and process CPU
ms per request, median over rounds; gain % = (off - on) / on.
  intent   POST /api/v1/uploads                 (rows deleted between batches)
  status   GET  /api/v1/attachments/{id}        (a ready image, the owner)
  list     GET  /api/v1/attachments             (20 ready images)

sandbox: two fork servers live at once, one without the server's decoder warm-up
(switches.off("server_warm_up"), processing/sandbox/warmup.py). steady: one
1920x1080 JPEG job at a time, 0.3 s apart, job time per round (job_ms); first: a
fresh server, then one job at once (time to ready of the first file after start).
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import switches  # noqa: E402
from bench.common import REPO, emit, small_jpeg  # noqa: E402


def paired(variants: dict[str, Callable[[], int]], rounds: int, seed: int = 33) -> dict[str, dict[str, float]]:
    """Per variant: median over rounds of wall and CPU ms per request; variants shuffled within each round."""
    for fn in variants.values():  # warm each once
        fn()
    rng = random.Random(seed)
    wall: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        names = list(variants)
        rng.shuffle(names)
        for name in names:
            time.sleep(0.05)
            w0, c0 = time.perf_counter(), time.process_time()
            n = variants[name]()
            wall[name].append((time.perf_counter() - w0) * 1000 / n)
            cpu[name].append((time.process_time() - c0) * 1000 / n)
    return {
        name: {
            "wall_ms": round(statistics.median(wall[name]), 3),
            "cpu_ms": round(statistics.median(cpu[name]), 3),
            "wall_runs": [round(x, 3) for x in wall[name]],
        }
        for name in variants
    }


def with_switch(disabled: str, fn: Callable[[], int]) -> Callable[[], int]:
    def run() -> int:
        with switches.off(disabled):
            return fn()

    return run


def gains(result: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    on = result["on"]
    return {
        name: {k: round(100 * (v[k] - on[k]) / on[k], 1) for k in ("wall_ms", "cpu_ms")}
        for name, v in result.items()
        if name != "on"
    }


def api_bench(rounds: int, batch: int, only: set[str] | None = None) -> dict:
    from bench.api import postgres_ok, prepare, scratch_database

    if not postgres_ok():
        return {"skipped": "PostgreSQL does not answer"}
    tmp = Path(tempfile.mkdtemp(prefix="airlock-tricks-"))
    db, env = scratch_database(
        tmp,
        AIRLOCK_DB_POOL={"max": 4, "conn_max_age": None},  # conn_max_age: the default
        AIRLOCK_RATE_LIMITS={"intents_per_minute": 100000000},
    )
    if os.environ.get("REDIS_URL"):
        env["REDIS_URL"] = os.environ["REDIS_URL"]
    try:
        facts = prepare(env)
        os.environ.update(env)
        import django

        django.setup()
        import logging

        logging.getLogger("airlock").setLevel(logging.WARNING)
        from django.conf import settings
        from django.db import connection
        from rest_framework.test import APIClient

        assert settings.DATABASES["default"]["ENGINE"] == "config.postgresql", settings.DATABASES["default"]
        tokens = facts["tokens"]
        clients = []
        for token in tokens:
            c = APIClient()
            c.credentials(HTTP_AUTHORIZATION=f"Token {token}")
            clients.append(c)
        owner = clients[0]
        body = {"profile": "image", "filename": "bench-intent.jpg", "size": 1000, "content_type": "image/jpeg"}

        def cleanup() -> None:
            with connection.cursor() as cursor:
                cursor.execute(
                    "DELETE FROM attachments_transitionlog WHERE attachment_id IN "
                    "(SELECT id FROM attachments_attachment WHERE filename = 'bench-intent.jpg')"
                )
                cursor.execute("DELETE FROM attachments_attachment WHERE filename = 'bench-intent.jpg'")
            connection.close()  # back to the pool, as at the end of a request

        def intents() -> int:
            for i in range(batch):
                response = clients[i % len(clients)].post("/api/v1/uploads", body, format="json")
                assert response.status_code == 201, response.content
            cleanup()
            return batch

        def reads(path: str) -> Callable[[], int]:
            def run() -> int:
                for _ in range(batch):
                    response = owner.get(path)
                    assert response.status_code == 200, response.content
                return batch

            return run

        status_path = f"/api/v1/attachments/{facts['read_ids'][0]}"
        list_client = clients[2]  # owns 20 ready rows (api_setup)

        def listing() -> int:
            for _ in range(batch):
                assert list_client.get("/api/v1/attachments").status_code == 200
            return batch

        figures = {
            "intent": (intents, ("insert_reserving", "shared_serializer")),
            "status": (reads(status_path), ("shared_serializer",)),
            "list20": (listing, ("shared_serializer",)),
        }
        out = {}
        for name, (fn, tricks) in figures.items():
            variants = {"on": with_switch("", fn)}
            variants.update({f"-{t}": with_switch(t, fn) for t in tricks if only is None or t in only})
            result = paired(variants, rounds)
            out[name] = {"variants": result, "gain_pct": gains(result)}
            print(name, out[name]["gain_pct"], file=sys.stderr)
        out["setup"] = (
            f"in-process test client, PostgreSQL pool of 4, {batch} requests per batch, {rounds} rounds, "
            f"cache {'Redis' if os.environ.get('REDIS_URL') else 'local memory'}"
        )
        return out
    finally:
        from django.db import connections

        connections.close_all()
        db.drop()


def sandbox_bench(rounds: int, jobs: int) -> dict:
    from processing.sandbox import runner

    image = small_jpeg(seed=3, size=(1920, 1080))
    tmp = Path(tempfile.mkdtemp(prefix="airlock-tricks-sandbox-"))
    src = tmp / "in.jpg"
    src.write_bytes(image)

    def server(disabled: str) -> runner._ForkServer:
        with switches.off(disabled):
            return runner._ForkServer()

    def job(srv: runner._ForkServer) -> None:
        runner._server = srv  # the bench's own pair of servers, not the module's
        work = Path(tempfile.mkdtemp(dir=tmp))
        result = runner.run_job("image", src, work)
        assert result.outcome == "ok", result

    servers = {"on": server(""), "-server_warm_up": server("server_warm_up")}

    def steady(name: str) -> Callable[[], int]:
        def run() -> int:
            spent = 0.0
            for _ in range(jobs):
                time.sleep(0.3)  # the spare warms (or not) while idle
                w0 = time.perf_counter()
                job(servers[name])
                spent += time.perf_counter() - w0
            steady_times[name].append(1000 * spent / jobs)
            return jobs

        return run

    steady_times: dict[str, list[float]] = {name: [] for name in servers}
    result = paired({name: steady(name) for name in servers}, rounds)
    for srv in servers.values():
        srv.stop()
    runner._server = None

    def first(disabled: str) -> Callable[[], int]:
        def run() -> int:
            srv = server(disabled)
            try:
                job(srv)
            finally:
                runner._server = None
                srv.stop()
            return 1

        return run

    first_result = paired({"on": first(""), "-server_warm_up": first("server_warm_up")}, rounds)
    return {
        "steady_job": {
            "variants": result,
            "gain_pct": gains(result),
            "job_ms": {n: round(statistics.median(t[1:]), 2) for n, t in steady_times.items()},
            "job_ms_runs": {n: [round(x, 2) for x in t[1:]] for n, t in steady_times.items()},
            "job_gain_pct": {
                n: round(100 * (statistics.median(t[1:]) / statistics.median(steady_times["on"][1:]) - 1), 1)
                for n, t in steady_times.items()
                if n != "on"
            },
        },
        "first_after_start": {"variants": first_result, "gain_pct": gains(first_result)},
        "setup": f"1920x1080 JPEG, {jobs} jobs per batch 0.3 s apart, {rounds} rounds; first: server start + 1 job",
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default="api,sandbox")
    parser.add_argument("--rounds", type=int, default=0)
    parser.add_argument("--batch", type=int, default=0)
    parser.add_argument("--tricks", default="", help="only these switches (comma-separated)")
    args = parser.parse_args()
    rounds = args.rounds or (3 if args.quick else 7)
    os.chdir(REPO)
    out: dict = {}
    parts = args.only.split(",")
    if "sandbox" in parts:
        out["sandbox"] = sandbox_bench(rounds, 4 if args.quick else 10)
    if "api" in parts:
        out["api"] = api_bench(
            rounds, args.batch or (100 if args.quick else 300), set(args.tricks.split(",")) if args.tricks else None
        )
    emit({"tricks": out})


if __name__ == "__main__":
    main()
