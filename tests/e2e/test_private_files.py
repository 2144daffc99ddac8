"""What the embedded default writes to its data directory is for its own user only (0600 files, 0700 dirs).

A real `serve` on a fresh data directory: the secret key, the SQLite database
(and its WAL files), stored uploads, derivatives and a quarantined rejection.
"""

from __future__ import annotations

import os
import stat

import pytest

from tests.e2e.test_serve import Server, _upload, _wait
from tests.support import EICAR, jpeg_bytes


@pytest.mark.slow
def test_serve_writes_nothing_group_or_world_readable(tmp_path):
    if os.environ.get("DATABASE_URL"):
        pytest.skip("the embedded default (SQLite in the data directory) is what this checks")
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    previous = os.umask(0o022)  # the usual umask (inherited by serve): the server's own modes are tested
    try:
        server = Server(data, {})
    finally:
        os.umask(previous)
    try:
        token = server.createuser("alice", "acme")
        photo = _upload(server.base, token, jpeg_bytes((320, 240)), profile="image", filename="p.jpg",
                        content_type="image/jpeg")
        virus = _upload(server.base, token, EICAR, profile="document", filename="v.pdf",
                        content_type="application/pdf")
        assert _wait(server.base, token, photo)["status"] == "ready"
        assert _wait(server.base, token, virus)["reason"]["code"] == "malware"
    finally:
        server.stop()
    loose = []
    for dirpath, dirnames, filenames in os.walk(data):
        for name in dirnames + [f for f in filenames if f != "serve.log"]:  # serve.log: the test's capture
            path = os.path.join(dirpath, name)
            mode = stat.S_IMODE(os.stat(path).st_mode)
            if mode & 0o077:
                loose.append((os.path.relpath(path, data), oct(mode)))
    assert {"secret_key", "airlock.sqlite3", "storage"} <= set(os.listdir(data))
    assert any("quarantine" in dirpath.split(os.sep) for dirpath, _, files in os.walk(data) if files)
    assert loose == []
