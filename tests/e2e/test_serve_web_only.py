"""`serve --no-worker --no-scheduler` on the embedded default: several web processes, jobs left for the worker's serve.

One web process answered half of what `gunicorn -w 2` does from the same app
(its threads queue on one GIL). Web only, nothing ties the web side to the
in-process broker, so it runs AIRLOCK_SERVE=web_processes=… processes like the
shared-services shape; its jobs stay in the outbox for the `serve` that runs the
worker instead of going to a broker nobody reads.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from tests.support import jpeg_bytes
from tests.support.processes import Server, api_upload, wait_settled

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def embedded_default(monkeypatch):
    """The embedded default's shape (SQLite, in-process broker) in every suite mode: the servers get no services."""
    for name in ("DATABASE_URL", "REDIS_URL", "RABBITMQ_URL"):
        monkeypatch.delenv(name, raising=False)


def _web_processes(master: int, expected: int) -> list[int]:
    deadline = time.monotonic() + 20
    while True:  # the first process answers /healthz before the last one is forked
        children = [int(pid) for pid in Path(f"/proc/{master}/task/{master}/children").read_text().split()]
        if len(children) >= expected or time.monotonic() > deadline:
            return children
        time.sleep(0.1)


def test_web_only_serve_runs_several_processes_and_leaves_its_jobs_to_the_worker(tmp_path):
    web = Server(tmp_path, {"AIRLOCK_SERVE": {"web_processes": 2}}, args=("--no-worker", "--no-scheduler"))
    try:
        assert len(_web_processes(web.proc.pid, 2)) == 2
        alice = web.createuser("alice", "acme")
        photo = api_upload(
            web.base, alice, jpeg_bytes((320, 240)), profile="image", filename="a.jpg", content_type="image/jpeg"
        )
        with sqlite3.connect(tmp_path / "airlock.sqlite3") as db:
            unsent = db.execute("SELECT count(*) FROM attachments_outboxmessage WHERE sent_at IS NULL").fetchone()[0]
        assert unsent >= 1  # the intake job waits for a worker, not "sent" into this process's own broker
    finally:
        web.stop()
    full = Server(tmp_path, {})  # the embedded default's serve, on the same data: its worker runs the job
    try:
        assert wait_settled(full.base, alice, photo)["status"] == "ready"
    finally:
        full.stop()
