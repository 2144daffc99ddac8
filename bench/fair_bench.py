#!/usr/bin/env python
"""Another tenant's time to ready while one tenant has a thousand files queued.

    python bench/fair_bench.py [--quick] [--modes embedded,redis] [--burst N]

Tenant A uploads N small JPEGs (1,000) as fast as eight senders can; the moment
its last PUT returns, tenant B uploads 20 single files, one every 0.3 s. The
figure is B's time to ready (the row's ready_at minus the moment B's PUT
returned; same machine, same clock), p99 over the 20, while A's backlog is
still queued. Each mode runs twice on fresh servers: with the per-tenant cap at
every stage (the default) and with it on derive only
(AIRLOCK_TENANT_FAIR_STAGES=derive: the code before processing/fairness.py),
so the before and after come from one run.

  embedded  `manage.py serve` on SQLite with the in-process broker and its worker (4 threads)
  redis     PostgreSQL + Redis: `serve --no-worker` (web + ticks) and `rundramatiq -p 1 -t 4`

How much of A's backlog was still unready when B's last file was ready is
reported too (`a_unready_at_end`): a figure near N means B did not wait for A.
Before the burst, tenant B sends 10 files one at a time, each after a quiet
second (ttr_idle_p50*_s): an idle worker's pick-up of each step, which
AIRLOCK_WORKER_POLL_MS bounds.

Prints one JSON line. Goal: ttr_p99_other_tenant_under_burst_s <= 1 s.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    REPO,
    ServerProcess,
    createuser,
    embedded_env,
    emit,
    free_port,
    migrate,
    percentile,
    r,
    scratch_dir,
    small_jpeg,
    stop_process,
)
from bench.time_to_ready import Client  # noqa: E402

REDIS = "redis://127.0.0.1:6379/0"
B_FILES, B_SPACING_S, SENDERS = 20, 0.3, 8
# Idle: one file after a quiet second, as a phone uploads, before any burst: every step's
# job waits for an idle worker to look at its queue (AIRLOCK_WORKER_POLL_MS).
IDLE_FILES, IDLE_GAP_S = 10, 1.0


def redis_ok() -> bool:
    try:
        import redis

        return bool(redis.Redis.from_url(REDIS, socket_connect_timeout=2).ping())
    except Exception:  # noqa: BLE001
        return False


class Stack:
    """The servers of one mode: serve (with its worker when embedded), or serve --no-worker + rundramatiq."""

    def __init__(self, mode: str, tmp: Path, fair_stages: str) -> None:
        self.mode, self.tmp = mode, tmp
        extra = {
            "AIRLOCK_TENANT_FAIR_STAGES": fair_stages,
            "AIRLOCK_CONCURRENCY": {"worker_threads": 4},
            "AIRLOCK_KEY_PREFIX": f"bench-{uuid.uuid4().hex[:8]}",
        }
        self.db = None
        if mode == "redis":
            from bench.api import Database

            self.db = Database(tmp)
            if not self.db.pg:
                raise RuntimeError("PostgreSQL is not answering")
            extra.update(DATABASE_URL=self.db.url, REDIS_URL=REDIS)
        self.env = embedded_env(tmp, DJANGO_SETTINGS_MODULE="config.settings.base", **extra)
        self.worker: subprocess.Popen | None = None
        self.server: ServerProcess | None = None
        self.worker_log = open(tmp / "rundramatiq.log", "wb")

    def start(self) -> None:
        port = free_port()
        if self.mode == "redis":
            migrate(self.env)
            self.worker = subprocess.Popen(
                [sys.executable, "manage.py", "rundramatiq", "-p", "1", "-t", "4"],
                cwd=REPO,
                env=self.env,
                stdout=self.worker_log,
                stderr=subprocess.STDOUT,
            )
            self.server = ServerProcess(
                [sys.executable, "manage.py", "serve", "--port", str(port), "--no-worker"],
                self.env,
                self.tmp / "serve.log",
                port,
            )
        else:  # serve migrates a new SQLite database itself
            self.server = ServerProcess(
                [sys.executable, "manage.py", "serve", "--port", str(port)], self.env, self.tmp / "serve.log", port
            )

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
        if self.worker is not None:
            stop_process(self.worker)
        self.worker_log.close()
        if self.db is not None:
            self.db.drop()


def run_once(mode: str, fair_stages: str, burst: int, *, measure_idle: bool = False) -> dict:
    tmp = scratch_dir(f"airlock-bench-fair-{mode}-")
    stack = Stack(mode, tmp, fair_stages)
    try:
        stack.start()
        assert stack.server is not None
        base = stack.server.base
        a_token, b_token = createuser(stack.env, "tenant_a", "tenant-a"), createuser(stack.env, "tenant_b", "tenant-b")
        images = [small_jpeg(seed=i, size=(160, 120)) for i in range(8)]
        warm = Client(base, b_token)
        first = warm.upload(images[0])
        assert first is not None
        warm.wait_ready(first[0])  # fork server, scanner rules, connections

        idle_ttr = []
        for i in range(IDLE_FILES if measure_idle else 0):
            time.sleep(IDLE_GAP_S)
            sent = warm.upload(images[i % len(images)])
            assert sent is not None
            idle_ttr.append(max(0.0, warm.wait_ready(sent[0]) - sent[1]))

        a_ids: list[str] = []
        lock = threading.Lock()

        def send(offset: int) -> None:
            sender = Client(base, a_token)
            for i in range(offset, burst, SENDERS):
                sent = sender.upload(images[i % len(images)])
                assert sent is not None
                with lock:
                    a_ids.append(sent[0])

        started = time.monotonic()
        senders = [threading.Thread(target=send, args=(n,)) for n in range(SENDERS)]
        for thread in senders:
            thread.start()
        for thread in senders:
            thread.join()
        burst_seconds = time.monotonic() - started

        b = Client(base, b_token)
        b_sent = []
        for i in range(B_FILES):
            sent = b.upload(images[i % len(images)])
            assert sent is not None
            b_sent.append(sent)
            time.sleep(B_SPACING_S)
        b_ttr = [max(0.0, b.wait_ready(attachment_id, timeout=600) - done) for attachment_id, done in b_sent]
        a_unready = sum(
            1
            for pk in a_ids
            if Client(base, a_token).session.get(f"{base}/api/v1/attachments/{pk}", timeout=30).json()["status"]
            not in ("ready", "rejected", "failed")
        )
        return {
            "p99_s": r(percentile(b_ttr, 99)),
            "p50_s": r(percentile(b_ttr, 50)),
            "max_s": r(max(b_ttr)),
            "a_files": burst,
            "a_upload_seconds": r(burst_seconds, 1),
            "a_unready_at_end": a_unready,
            "fair_stages": fair_stages or "(none)",
            **({"idle_p50_s": r(percentile(idle_ttr, 50)), "idle_max_s": r(max(idle_ttr))} if idle_ttr else {}),
        }
    finally:
        stack.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--modes", default="embedded,redis")
    parser.add_argument("--burst", type=int, default=1000)
    args = parser.parse_args()
    result: dict[str, object] = {}
    for mode in args.modes.split(","):
        if mode == "redis" and not redis_ok():
            result["fair_redis_skipped"] = "Redis not answering on 127.0.0.1:6379"
            continue
        after = run_once(mode, "intake,scan,derive", args.burst, measure_idle=True)
        before = run_once(mode, "derive", args.burst)
        suffix = "" if mode == "embedded" else f"_{mode}"
        result[f"ttr_p99_other_tenant_under_burst{suffix}_s"] = after["p99_s"]
        result[f"ttr_p99_other_tenant_under_burst{suffix}_derive_only_s"] = before["p99_s"]
        result[f"ttr_idle_p50{suffix}_s"] = after["idle_p50_s"]
        result[f"fair_{mode}"] = {"every_stage": after, "derive_only": before}
    result["fair_setup"] = (
        f"tenant A: {args.burst} 160x120 JPEGs from {SENDERS} senders, then tenant B: "
        f"{B_FILES} files {B_SPACING_S}s apart; 4 worker threads; idle: {IDLE_FILES} files, "
        f"each after {IDLE_GAP_S}s of quiet, before the burst; "
        "AIRLOCK_TENANT_CONCURRENCY=2 per tenant (all stages)"
    )
    emit(result)


if __name__ == "__main__":
    main()
