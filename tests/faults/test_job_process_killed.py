"""One worker process SIGKILLed mid-burst under `serve`: replaced without an operator, its files ready within a minute.

`serve` on PostgreSQL + Redis + clamd runs its web processes and one job
process (worker + scheduler) that it supervises. The job process is killed
with SIGKILL 2 s into a burst of photos, with the default lease (300 s) and
beat (a worker is taken for dead after three missed beats: 46 s). `serve`
starts a new job process; that process finds, on its own host, that the dead
worker's process is gone and takes back at once what it held: its tenant
slots, and the leases of the files it was running. Every file must be ready
within 60 s of the kill, nothing is served before `ready`, and another
tenant's upload is accepted meanwhile.
"""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from tests.support import jpeg_bytes
from tests.support.processes import Server

from .support import descendants, wait_until
from .test_redis_restart import _assert_not_served, _upload
from .test_worker_kill_recovery import _statuses, _story

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis, pytest.mark.clamd]

FILES = 24
RECOVERY_SECONDS = 60


def job_processes(server: Server) -> list[int]:
    """The `serve --jobs-only` children of this server (its worker and scheduler)."""
    found = []
    for pid in descendants(server.proc.pid):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--jobs-only" in argv:
            found.append(pid)
    return found


def test_a_killed_job_process_is_replaced_and_its_files_are_ready_within_a_minute(tmp_path):
    socket_path = os.environ.get("CLAMD_SOCKET")
    assert socket_path, "needs clamd (scripts/test sets CLAMD_SOCKET)"
    server = Server(
        tmp_path,
        {"CLAMD_SOCKET": socket_path, "AIRLOCK_SERVE": {"tick_seconds": 2}, "AIRLOCK_LOG_LEVEL": "WARNING"},
    )
    assert server.dbname, "the production topology runs on PostgreSQL (scripts/test sets DATABASE_URL)"
    try:
        token = server.createuser("guest", "wedding")
        peer = server.createuser("peer", "wedding")
        other = server.createuser("neighbour", "bakery")
        [first] = wait_until(lambda: job_processes(server) or None, 30, "serve's job process")
        photos = [jpeg_bytes((1600, 1200), color=(i * 9 % 256, 90, 160)) for i in range(FILES)]
        with ThreadPoolExecutor(max_workers=4) as pool:
            uploads = [pool.submit(_upload, server.base, token, data, f"p{i}.jpg") for i, data in enumerate(photos)]
            time.sleep(2.0)
            os.kill(first, signal.SIGKILL)
            killed = time.monotonic()
            ids = [future.result() for future in uploads]
        neighbour = _upload(server.base, other, jpeg_bytes((120, 90)), "n.jpg", patient=False)
        ids.append(neighbour)

        statuses: dict[str, str] = {}
        while time.monotonic() < killed + RECOVERY_SECONDS:
            statuses = _statuses(server, ids)
            if set(statuses.values()) == {"ready"}:
                break
            _assert_not_served(server, peer, ids[:6], statuses)
            time.sleep(0.5)
        took = time.monotonic() - killed
        story = _story(server, ids)
        print(f"all ready {took:.1f} s after the job process was killed; {story}")
        late = {pk: s for pk, s in statuses.items() if s != "ready"}
        assert not late, f"{len(late)} files not ready {RECOVERY_SECONDS} s after the kill: {late}; {story}"
        replaced = job_processes(server)
        assert replaced and first not in replaced, "serve did not start a new job process"
        response = requests.get(f"{server.base}/readyz", timeout=30)
        assert response.status_code == 200, response.text
    finally:
        server.stop()
