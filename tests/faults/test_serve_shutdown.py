"""SIGTERM to `serve` while a file is mid-scan: the lease is handed back, the file is pending at once.

The scan is held in flight by a clamd that reads the stream and never answers.
Without the hand-back the row would stay `processing` until its lease expired
(AIRLOCK_LEASE_SECONDS, 5 minutes by default) and count an attempt.
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


def _row(server: Server, tmp, attachment_id: str) -> tuple[str, int, list[str]]:
    """(status, attempts, transitions) read straight from the server's database."""
    status_sql = "SELECT status, attempts FROM attachments_attachment WHERE id = {p}"
    log_sql = "SELECT transition FROM attachments_transitionlog WHERE attachment_id = {p} ORDER BY id"
    if server.dbname:
        with psycopg.connect(server.admin_url) as conn:
            status, attempts = conn.execute(status_sql.format(p="%s"), [attachment_id]).fetchone()
            names = [r[0] for r in conn.execute(log_sql.format(p="%s"), [attachment_id])]
    else:
        with sqlite3.connect(tmp / "airlock.sqlite3") as conn:
            key = attachment_id.replace("-", "")
            status, attempts = conn.execute(status_sql.format(p="?"), [key]).fetchone()
            names = [r[0] for r in conn.execute(log_sql.format(p="?"), [key])]
    return status, attempts, names


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
        assert _row(server, tmp_path, intent["id"])[0] == "processing"
        stopped = time.monotonic()
        server.proc.terminate()
        assert server.proc.wait(timeout=60) == 0
        assert time.monotonic() - stopped < 30
        status, attempts, transitions = _row(server, tmp_path, intent["id"])
        assert (status, attempts) == ("pending", 0), (status, attempts, transitions)
        assert transitions[-1] == "release", transitions
    finally:
        server.stop()
        clamd.close()
