"""SIGTERM to `serve` while a file is mid-scan: the file is pending, with its new intake job sent at once.

The scan is held in flight by a clamd that reads the stream and never answers.
Intake runs the scan before it takes the lease (local uploads are write-once),
so the file is pending throughout; without the hand-back its job would be lost
with the stopped process until the reconciler found it missing (minutes later).
"""

from __future__ import annotations

import sqlite3
import time

import psycopg
import pytest
import requests

from tests.support import jpeg_bytes
from tests.support.processes import Server

from .support import StallingClamd

pytestmark = pytest.mark.slow


def _row(server: Server, tmp, attachment_id: str) -> tuple[str, int, list[str], int]:
    """(status, attempts, transitions, intake jobs) read straight from the server's database."""
    status_sql = "SELECT status, attempts FROM attachments_attachment WHERE id = {p}"
    log_sql = "SELECT transition FROM attachments_transitionlog WHERE attachment_id = {p} ORDER BY id"
    jobs_sql = "SELECT count(*) FROM attachments_outboxmessage WHERE actor_name = 'intake' AND {args} LIKE {p}"
    pattern = f'%"{attachment_id}"%'
    if server.dbname:
        with psycopg.connect(server.admin_url) as conn:
            status, attempts = conn.execute(status_sql.format(p="%s"), [attachment_id]).fetchone()
            names = [r[0] for r in conn.execute(log_sql.format(p="%s"), [attachment_id])]
            [jobs] = conn.execute(jobs_sql.format(args="args::text", p="%s"), [pattern]).fetchone()
    else:
        with sqlite3.connect(tmp / "airlock.sqlite3") as conn:
            key = attachment_id.replace("-", "")
            status, attempts = conn.execute(status_sql.format(p="?"), [key]).fetchone()
            names = [r[0] for r in conn.execute(log_sql.format(p="?"), [key])]
            [jobs] = conn.execute(jobs_sql.format(args="args", p="?"), [pattern]).fetchone()
    return status, attempts, names, jobs


def test_sigterm_mid_scan_returns_the_file_to_pending_at_once(tmp_path, short_tmp):
    clamd = StallingClamd(short_tmp / "stall.sock")
    server = Server(tmp_path, {"CLAMD_SOCKET": str(clamd.path), "CLAMD_HOST": "", "AIRLOCK_YARA_ENABLED": "0"})
    try:
        token = server.createuser("stopper", "stop")
        data = jpeg_bytes((64, 48))
        intent = requests.post(
            f"{server.base}/api/v1/uploads",
            headers={"Authorization": f"Token {token}"},
            timeout=10,
            json={"profile": "image", "filename": "a.jpg", "size": len(data), "content_type": "image/jpeg"},
        ).json()
        assert (
            requests.put(
                intent["upload"]["url"], data=data, headers=intent["upload"]["headers"], timeout=30
            ).status_code
            == 202
        )
        assert clamd.received.wait(60), "the scan never reached clamd"
        status, _, _, sent = _row(server, tmp_path, intent["id"])
        # Intake's scan runs before its lease. One job, or two: the serve tick's poll for silent uploads can
        # see the PUT's bytes before the PUT's own transaction records them, and both start intake
        # (idempotent: the second finds the file taken).
        assert status == "pending" and sent >= 1, (status, sent)
        stopped = time.monotonic()
        server.proc.terminate()
        assert server.proc.wait(timeout=60) == 0
        assert time.monotonic() - stopped < 30
        status, attempts, transitions, jobs = _row(server, tmp_path, intent["id"])
        assert (status, attempts) == ("pending", 0), (status, attempts, transitions)
        assert "start" not in transitions, transitions
        # At least one more: on Redis the broker may hand the interrupted message to another thread before
        # the stop, whose intake is sent again too (each one is idempotent).
        assert jobs > sent, "the stopping worker sent the interrupted intake's job again"
    finally:
        server.stop()
        clamd.close()
