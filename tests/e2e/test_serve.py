"""`manage.py serve` as a real client meets it: a subprocess, HTTP over loopback, users from createuser.

Runs in whatever mode the environment selects (scripts/test: PostgreSQL + Redis
+ clamd; --embedded: SQLite + in-process broker + YARA), and once against an S3
server (moto over HTTP) with no storage events configured at all.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import requests

from tests.support import EICAR, jpeg_bytes, pdf_bytes
from tests.support.processes import Server, api_upload, wait_settled

ROOT = Path(__file__).resolve().parents[2]


def _flow(server: Server) -> None:
    alice = server.createuser("alice", "acme")
    bob = server.createuser("bob", "acme")
    mallory = server.createuser("mallory", "evil")
    base = server.base
    photo = api_upload(
        base, alice, jpeg_bytes((640, 480)), profile="image", filename="ça va.jpg", content_type="image/jpeg"
    )
    doc = api_upload(
        base,
        alice,
        pdf_bytes("searchable aardvark"),
        profile="document",
        filename="a.pdf",
        content_type="application/pdf",
    )
    virus = api_upload(base, alice, EICAR, profile="document", filename="eicar.pdf", content_type="application/pdf")
    assert wait_settled(base, alice, photo)["status"] == "ready"
    assert wait_settled(base, alice, doc)["status"] == "ready"
    rejected = wait_settled(base, alice, virus)
    assert rejected["status"] == "rejected" and rejected["reason"]["code"] == "malware"
    got = requests.get(
        f"{base}/api/v1/attachments/{photo}/download",
        headers={"Authorization": f"Token {bob}"},
        timeout=10,
        allow_redirects=False,
    )
    assert got.headers["X-Content-Type-Options"] == "nosniff"
    assert got.headers["Content-Security-Policy"] == "default-src 'none'; sandbox"
    if got.status_code == 302:  # S3: the presigned GET fixes type and disposition
        got = requests.get(got.headers["Location"], timeout=10)
    assert got.status_code == 200 and got.content[:2] == b"\xff\xd8"
    assert got.headers["Content-Type"] == "image/jpeg"
    assert "filename*=UTF-8''%C3%A7a%20va.jpg" in got.headers["Content-Disposition"]
    thumb = requests.get(
        f"{base}/api/v1/attachments/{photo}/thumbnail", headers={"Authorization": f"Token {bob}"}, timeout=10
    )
    assert thumb.status_code == 200 and thumb.headers["Content-Type"] == "image/webp"
    # The resource's signed link, fetched as an <img src> would: no header, no cookie.
    links = requests.get(
        f"{base}/api/v1/attachments/{photo}", headers={"Authorization": f"Token {bob}"}, timeout=10
    ).json()["links"]
    signed = requests.get(links["thumbnail"], timeout=10)
    assert signed.status_code == 200 and signed.headers["Content-Type"] == "image/webp"
    for token, path in ((mallory, photo), (bob, virus), (alice, virus)):
        assert (
            requests.get(
                f"{base}/api/v1/attachments/{path}/download", headers={"Authorization": f"Token {token}"}, timeout=10
            ).status_code
            == 404
        )
    found = requests.get(
        f"{base}/api/v1/search?q=aardvark", headers={"Authorization": f"Token {bob}"}, timeout=10
    ).json()["results"]
    assert [r["id"] for r in found] == [doc]
    assert requests.get(f"{base}/readyz", timeout=10).status_code == 200


@pytest.mark.slow
def test_serve_end_to_end(tmp_path):
    server = Server(tmp_path, {})
    try:
        _flow(server)
    finally:
        server.stop()


@pytest.mark.slow
@pytest.mark.s3
def test_serve_end_to_end_on_s3_without_events(tmp_path, moto_endpoint):
    from tests.s3.support import moto_bucket_env

    server = Server(tmp_path, moto_bucket_env(moto_endpoint, "e2e"))
    try:
        _flow(server)
    finally:
        server.stop()
