"""Operator commands beside a running `serve` (issue #29 item 5, issue #28 item 6).

The story: on the embedded default, `manage.py backfill --rescan --profile image`
put five committed photos back to `pending` and sent their jobs to the
command's own in-process broker, which died with it; another user got 404 for
15 minutes. Now a rescan never leaves `ready`, a new signature found by the
background rescan takes down only the file it matches, and a command's jobs
are handed to the running serve through the outbox (or refused without one).
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from processing.scanners import yara as yara_module
from tests.support import jpeg_bytes
from tests.support.processes import api_upload, wait_settled

from .test_serve import ROOT, Server

pytestmark = pytest.mark.slow


def _manage(server: Server, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=server.env, capture_output=True, text=True, timeout=120
    )


def _sql(server: Server, tmp: Path, statement: str) -> None:
    if server.dbname:
        subprocess.run(["psql", server.admin_url, "-qc", statement], check=True)
    else:
        with sqlite3.connect(tmp / "airlock.sqlite3") as db:
            db.execute(statement)


def _status(server: Server, token: str, attachment_id: str) -> str:
    return requests.get(
        f"{server.base}/api/v1/attachments/{attachment_id}", headers={"Authorization": f"Token {token}"}, timeout=10
    ).json()["status"]


def _download(server: Server, token: str, attachment_id: str) -> int:
    got = requests.get(
        f"{server.base}/api/v1/attachments/{attachment_id}/download",
        headers={"Authorization": f"Token {token}"},
        timeout=10,
        allow_redirects=False,
    )
    return got.status_code


def _photos(server: Server, alice: str, n: int) -> list[str]:
    ids = [
        api_upload(
            server.base,
            alice,
            jpeg_bytes((320 + 16 * i, 240)),
            profile="image",
            filename=f"p{i}.jpg",
            content_type="image/jpeg",
        )
        for i in range(n)
    ]
    assert {wait_settled(server.base, alice, i)["status"] for i in ids} == {"ready"}
    committed = requests.post(
        f"{server.base}/api/v1/attachments/commit",
        json={"ids": ids, "ref": "ad:42"},
        headers={"Authorization": f"Token {alice}"},
        timeout=10,
    )
    assert committed.status_code == 200, committed.text
    return ids


def test_a_rescan_beside_serve_hides_nothing_and_a_new_signature_takes_down_one_file(tmp_path):
    rules = tmp_path / "rules"
    shutil.copytree(yara_module.DEFAULT_RULES_DIR, rules)
    server = Server(tmp_path, {"AIRLOCK_YARA_RULES_DIR": str(rules)})
    try:
        alice, bob = server.createuser("alice", "acme"), server.createuser("bob", "acme")
        ids = _photos(server, alice, 5)

        done = _manage(server, "backfill", "--rescan", "--profile", "image", "--no-progress")
        assert done.returncode == 0, done.stderr
        assert "flagged 5 ready files" in done.stdout
        # The photo a signature added now matches (by its exact size: the others differ).
        size = len(jpeg_bytes((320, 240)))
        assert size not in {len(jpeg_bytes((320 + 16 * i, 240))) for i in range(1, 5)}
        (rules / "new_signature.yar").write_text(f"rule New_Signature {{ condition: filesize == {size} }}\n")

        reads: list[int] = []
        deadline = time.monotonic() + 60
        while _status(server, alice, ids[0]) != "rejected":
            assert time.monotonic() < deadline, "the background rescan did not take the matching photo down"
            reads += [_download(server, bob, i) for i in ids[1:]]
            time.sleep(0.2)
        assert reads and set(reads) == {200}  # every other photo stayed served all along
        hit = requests.get(
            f"{server.base}/api/v1/attachments/{ids[0]}", headers={"Authorization": f"Token {alice}"}, timeout=10
        ).json()
        assert hit["reason"]["code"] == "malware" and "New_Signature" in hit["reason"]["message"]
        assert _download(server, bob, ids[0]) == 404
        assert {_status(server, alice, i) for i in ids[1:]} == {"ready"}
        assert {_download(server, bob, i) for i in ids[1:]} == {200}
    finally:
        server.stop()


def test_a_commands_jobs_are_run_by_the_running_serve_and_refused_without_one(tmp_path):
    server = Server(tmp_path, {})
    try:
        alice = server.createuser("alice", "acme")
        ids = _photos(server, alice, 2)
        # One photo lost its thumbnail row: backfill re-processes it (through pending, as it always did).
        _sql(
            server,
            tmp_path,
            f"DELETE FROM attachments_derivative WHERE attachment_id = '{ids[0]}'"
            if server.dbname
            else f"DELETE FROM attachments_derivative WHERE attachment_id = '{ids[0].replace('-', '')}'",
        )
        done = _manage(server, "backfill", "--profile", "image", "--no-progress")
        assert done.returncode == 0, done.stderr
        assert "re-processed 1 of 1" in done.stdout
        started = time.monotonic()
        assert wait_settled(server.base, alice, ids[0])["status"] == "ready"
        assert time.monotonic() - started < 30  # serve relayed the job: no 15-minute re-drive
    finally:
        server.stop()
    if server.dbname:
        return  # with a shared broker a command sends its jobs itself; only the embedded default refuses
    refused = _manage(server, "backfill", "--profile", "image", "--no-progress")
    assert refused.returncode != 0
    assert "no `manage.py serve` is running" in refused.stderr
