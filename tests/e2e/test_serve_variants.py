"""Single flight under `serve`: many concurrent requests for one cold variant make it once.

On PostgreSQL the server runs two web processes, so the requests race across
processes (the claim is a row, not an in-process lock); on the embedded default
they race across the threads of one.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from threading import Barrier

import pytest
import requests

from tests.support import jpeg_bytes
from tests.support.processes import api_upload, wait_settled

from .test_serve import Server

pytestmark = [pytest.mark.slow]

CONCURRENT = 24


def _generations(log_path, attachment_id: str) -> int:
    made = 0
    for line in log_path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("event") == "variant made" and record.get("attachment_id") == attachment_id:
            made += 1
    return made


def test_concurrent_cold_requests_make_the_variant_once(tmp_path):
    shared = os.environ.get("DATABASE_URL", "").startswith("postgres")
    server = Server(tmp_path, {"AIRLOCK_SERVE": {"web_processes": 2}} if shared else {})
    try:
        alice = server.createuser("alice", "acme")
        photo = api_upload(
            server.base, alice, jpeg_bytes((3000, 2000)), profile="image", filename="big.jpg", content_type="image/jpeg"
        )
        body = wait_settled(server.base, alice, photo)
        assert body["status"] == "ready"
        link = body["links"]["variants"]["medium"]  # signed: sent with no header, as an <img> would
        start = Barrier(CONCURRENT)

        def fetch(_):
            start.wait()
            with requests.Session() as session:  # a connection each, so both processes take some
                got = session.get(link, headers={"Accept": "image/webp,*/*"}, timeout=60)
            return got.status_code, got.headers.get("ETag"), got.headers.get("Content-Type"), len(got.content)

        with ThreadPoolExecutor(CONCURRENT) as pool:
            results = list(pool.map(fetch, range(CONCURRENT)))
        assert {status for status, *_ in results} == {200}, results
        assert len({etag for _, etag, *_ in results}) == 1 and results[0][1]
        assert {(kind, size) for _, _, kind, size in results} == {("image/webp", results[0][3])}
        assert _generations(tmp_path / "serve.log", photo) == 1
    finally:
        server.stop()
