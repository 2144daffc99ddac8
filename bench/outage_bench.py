#!/usr/bin/env python
"""Time from an outage's end to its burst ready: Redis lost, database connections cut, clamd down, a worker killed.

    python bench/outage_bench.py [--quick] [--files 40]

`manage.py serve` with its default sizing and settings (web processes and one job
process that it supervises) on PostgreSQL (a scratch database), a Redis and a clamd
of this bench's own (so restarting them touches nobody else). One after the other,
each outage hits a burst of --files photos of one tenant 1.5 s after its first upload:

  redis     Redis SIGKILLed and started again empty (every queued job, slot and beat lost)
  database  every connection of serve to its database terminated (pg_terminate_backend)
  clamd     clamd stopped for 60 s (15 s with --quick), then started again
  worker    serve's job process SIGKILLed (serve starts a new one)

The uploader retries a 503 (Retry-After) or a refused connection as a client does.
For each outage: the time from its end (Redis answering again, the connections cut,
clamd answering again, the kill) to the last file of its burst ready, by the
database's `ready_at`.

  outage_recovery_p99_s      the worst of the four (goal <= 60 s)
  outage_recovery.<outage>_s each one; None when a file was not ready 300 s after
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.api import Database  # noqa: E402
from bench.common import REPO, emit, migrate, r, scratch_dir, serve  # noqa: E402
from bench.serve_bench import service_env  # noqa: E402
from tests.faults.support import descendants  # noqa: E402
from tests.support import jpeg_bytes  # noqa: E402
from tests.support.processes import PrivateClamd, PrivateRedis  # noqa: E402

GIVE_UP_SECONDS = 300.0
ANSWERS: dict[str, int] = {}  # what the API answered instead of accepting, by status ("refused": no connection)


def createuser(env: dict[str, str], name: str, tenant: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", "createuser", name, "--tenant", tenant],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"createuser: {done.stderr[-1500:]}")
    return done.stdout.strip().splitlines()[-1]


def upload(base: str, token: str, data: bytes, name: str) -> str:
    """Intent + PUT, riding out 503s and refused connections for up to GIVE_UP_SECONDS, as a client does."""
    import requests

    deadline = time.monotonic() + GIVE_UP_SECONDS

    def patiently(send: Callable[[], requests.Response]) -> requests.Response:
        while True:
            try:
                response = send()
                if response.status_code != 503 and response.status_code < 500:
                    return response
                ANSWERS[str(response.status_code)] = ANSWERS.get(str(response.status_code), 0) + 1
            except requests.ConnectionError:
                ANSWERS["refused"] = ANSWERS.get("refused", 0) + 1
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name}: not accepted within {GIVE_UP_SECONDS} s")
            time.sleep(0.5)

    intent = patiently(
        lambda: requests.post(
            f"{base}/api/v1/uploads",
            headers={"Authorization": f"Token {token}"},
            timeout=60,
            json={"profile": "image", "filename": name, "size": len(data), "content_type": "image/jpeg"},
        )
    )
    if intent.status_code != 201:
        raise RuntimeError(f"{name}: intent {intent.status_code} {intent.text[:300]}")
    target = intent.json()["upload"]
    sent = patiently(lambda: requests.put(target["url"], data=data, headers=target["headers"], timeout=120))
    if sent.status_code == 409 and sent.json()["error"]["code"] == "ALREADY_UPLOADED":
        return intent.json()["id"]  # an earlier try's bytes got in before its answer was lost: done
    if sent.status_code not in (200, 201, 202, 204):
        raise RuntimeError(f"{name}: upload {sent.status_code} {sent.text[:300]}")
    return intent.json()["id"]


def last_ready(db_url: str, ids: list[str]) -> datetime | None:
    """The latest ready_at of the files, once every one is ready (None before)."""
    import psycopg

    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT status, ready_at FROM attachments_attachment WHERE id = ANY(%s::uuid[])", [ids]
        ).fetchall()
    if len(rows) < len(ids) or any(status != "ready" for status, _ in rows):
        return None
    return max(ready_at for _, ready_at in rows)


def job_processes(server_pid: int) -> list[int]:
    found = []
    for pid in descendants(server_pid):
        try:
            if b"--jobs-only" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                found.append(pid)
        except OSError:
            continue
    return found


def terminate_connections(db: Database) -> int:
    import psycopg

    with psycopg.connect(f"{db.url.rsplit('/', 1)[0]}/postgres", autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [db.name],
        ).fetchall()
    return len(rows)


def burst_through(
    outage: Callable[[], None], *, base: str, token: str, db_url: str, files: int, seed: int
) -> tuple[float | None, float]:
    """Upload a burst, run `outage` (it returns when the outage ends) 1.5 s in; (recovery s, outage s)."""
    photos = [jpeg_bytes((1280, 960), color=((seed * 31 + i * 7) % 256, 80, 170)) for i in range(files)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [pool.submit(upload, base, token, data, f"o{seed}-{i}.jpg") for i, data in enumerate(photos)]
        time.sleep(1.5)
        began = time.monotonic()
        outage()
        ended_wall = datetime.now(UTC)
        ended = time.monotonic()
        ids = [future.result() for future in futures]
    while time.monotonic() < ended + GIVE_UP_SECONDS:
        done = last_ready(db_url, ids)
        if done is not None:
            return max(0.0, (done - ended_wall).total_seconds()), ended - began
        time.sleep(0.5)
    return None, ended - began


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--files", type=int, default=0)
    args = parser.parse_args()
    files = args.files or (16 if args.quick else 40)
    clamd_down = 15.0 if args.quick else 60.0
    load_before = [round(x, 2) for x in os.getloadavg()]
    tmp = scratch_dir("airlock-bench-outage-")
    db = Database(tmp)
    if not db.pg:
        db.drop()
        raise SystemExit("the outage bench needs PostgreSQL")
    redis = PrivateRedis()
    clamd = PrivateClamd()
    server = None
    try:
        redis.start()
        clamd.start()
        env = service_env(tmp, db, redis=False, CLAMD_SOCKET=clamd.socket)
        env["REDIS_URL"] = redis.url
        migrate(env)
        server = serve(env, tmp)
        token = createuser(env, "guest", "wedding")
        served = server

        def redis_lost() -> None:
            redis.kill()
            redis.start()

        def database_cut() -> None:
            terminate_connections(db)

        def clamd_down_for() -> None:
            clamd.stop()
            time.sleep(clamd_down)
            clamd.start()

        def worker_killed() -> None:
            for pid in job_processes(served.proc.pid):
                os.kill(pid, signal.SIGKILL)

        outages = {"redis": redis_lost, "database": database_cut, "clamd": clamd_down_for, "worker": worker_killed}
        recovery: dict[str, float | None] = {}
        lasted: dict[str, float] = {}
        for seed, (name, outage) in enumerate(outages.items()):
            took, length = burst_through(outage, base=server.base, token=token, db_url=db.url, files=files, seed=seed)
            recovery[name], lasted[name] = took, length
            print(f"{name}: outage {length:.1f} s, last file ready {took} s after it ended", file=sys.stderr)
    finally:
        if server is not None:
            server.stop()
        redis.kill()
        clamd.remove()
        db.drop()
    measured = [v for v in recovery.values() if v is not None]
    worst = None if len(measured) < len(recovery) else max(measured)
    emit(
        {
            "outage_recovery_p99_s": r(worst, 2) if worst is not None else None,
            "outage_recovery": {
                **{f"{name}_s": (r(v, 2) if v is not None else None) for name, v in recovery.items()},
                **{f"{name}_outage_s": r(v, 1) for name, v in lasted.items()},
                "files_per_burst": files,
                "answers_retried": dict(sorted(ANSWERS.items())),
                "loadavg_before": load_before,
                "loadavg_after": [round(x, 2) for x in os.getloadavg()],
                "setup": "serve defaults (web processes + supervised job process) on PostgreSQL, a Redis and a "
                "clamd of its own; one burst of 1280x960 JPEGs per outage, the outage 1.5 s into it; "
                "recovery = the burst's last ready_at minus the outage's end",
            },
        }
    )


if __name__ == "__main__":
    main()
