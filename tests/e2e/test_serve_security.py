"""A real `serve` on a fresh data directory, as an attacker on the same machine would look at it.

What it writes is for its own user only (0600 files, 0700 dirs: the secret key,
the SQLite database and its WAL files, stored uploads, derivatives, a
quarantined rejection), and its log never shows an upload token, even for a
refused attempt (which leaves the URL valid).
"""

from __future__ import annotations

import os
import stat

import pytest
import requests

from tests.support import EICAR, jpeg_bytes
from tests.support.processes import Server, api_upload, wait_settled


@pytest.mark.slow
def test_serve_keeps_its_files_private_and_its_log_free_of_tokens(tmp_path, monkeypatch):
    # The embedded default (SQLite, storage and key in the data directory) in every mode of the suite.
    for name in ("DATABASE_URL", "REDIS_URL", "DJANGO_SECRET_KEY"):
        monkeypatch.delenv(name, raising=False)
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    previous = os.umask(0o022)  # the usual umask (inherited by serve): the server's own modes are tested
    try:
        server = Server(data, {})
    finally:
        os.umask(previous)
    try:
        token = server.createuser("alice", "acme")
        auth = {"Authorization": f"Token {token}"}
        small = jpeg_bytes((64, 64))
        intent = requests.post(
            f"{server.base}/api/v1/uploads",
            headers=auth,
            timeout=10,
            json={"profile": "image", "filename": "x.jpg", "size": len(small), "content_type": "image/jpeg"},
        ).json()
        url = intent["upload"]["url"]
        upload_token = url.split("token=", 1)[1]
        refused = requests.put(url, data=small + b"x" * 64, timeout=10)  # over the declared size
        assert refused.status_code == 413
        assert requests.put(url, data=small, timeout=10).status_code == 202  # the URL was not used up
        assert requests.put(url, data=small, timeout=10).status_code == 409  # now it is
        assert (
            requests.get(
                f"{server.base}/api/v1/attachments", timeout=10, headers={"Authorization": f"Token {token[:-4]}wxyz"}
            ).status_code
            == 401
        )
        photo = api_upload(
            server.base, token, jpeg_bytes((320, 240)), profile="image", filename="p.jpg", content_type="image/jpeg"
        )
        virus = api_upload(
            server.base, token, EICAR, profile="document", filename="v.pdf", content_type="application/pdf"
        )
        assert wait_settled(server.base, token, photo)["status"] == "ready"
        assert wait_settled(server.base, token, virus)["reason"]["code"] == "malware"
    finally:
        server.stop()
    loose = []
    for dirpath, dirnames, filenames in os.walk(data):
        if dirpath == str(data) and "static" in dirnames:
            dirnames.remove("static")  # STATIC_ROOT: the admin's public CSS and scripts, not data
        for name in dirnames + [f for f in filenames if f != "serve.log"]:  # serve.log: the test's capture
            path = os.path.join(dirpath, name)
            mode = stat.S_IMODE(os.stat(path).st_mode)
            if mode & 0o077:
                loose.append((os.path.relpath(path, data), oct(mode)))
    assert {"secret_key", "airlock.sqlite3", "storage"} <= set(os.listdir(data))
    assert any("quarantine" in dirpath.split(os.sep) for dirpath, _, files in os.walk(data) if files)
    assert loose == []
    log = (data / "serve.log").read_text()
    assert " 413 " in log or "413" in log  # the refusal was logged…
    assert upload_token not in log and upload_token.rsplit(":", 1)[-1] not in log  # …without its token
    assert token not in log and token[:-4] not in log
