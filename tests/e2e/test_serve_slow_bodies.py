"""Clients that send their headers and then stall in the body hold no database connection.

On PostgreSQL each web process has a pool of AIRLOCK_DB_POOL=max=… connections.
A view that queried before reading the body kept its connection while the body
trickled in, so a few stalled uploads emptied the pool and every other request
waited AIRLOCK_DB_POOL=timeout_seconds=…, then answered 503 (ops/body_first.py,
attachments/services/connections.py).
"""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit

import pytest
import requests

from tests.support.processes import Server, tus_create

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]

MIB = 1 << 20
JPEG_HEAD = b"\xff\xd8\xff\xe0"


def _stall(port: int, head: str, first_bytes: bytes) -> socket.socket:
    """Send a request's headers and the first bytes of its body, then nothing more."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(head.encode() + first_bytes)
    return sock


def test_stalled_bodies_of_every_kind_leave_the_pool_to_other_requests(tmp_path):
    server = Server(
        tmp_path, {"AIRLOCK_DB_POOL": {"max": 2, "timeout_seconds": 3}, "AIRLOCK_SERVE": {"web_processes": 1}}
    )
    stalled: list[socket.socket] = []
    try:
        token = server.createuser("slowpoke", "slow")
        auth = {"Authorization": f"Token {token}"}
        big = 3 * MIB  # over DATA_UPLOAD_MAX_MEMORY_SIZE: streamed by the view, not read up front
        intents = [
            requests.post(
                f"{server.base}/api/v1/uploads",
                headers=auth,
                timeout=10,
                json={"profile": "image", "filename": "a.jpg", "size": big, "content_type": "image/jpeg"},
            ).json()
            for _ in range(2)
        ]
        tus = tus_create(server.base, token, big)
        host = f"Host: 127.0.0.1:{server.port}\r\n"
        for intent in intents:  # signed PUTs
            url = urlsplit(intent["upload"]["url"])
            headers = "".join(f"{k}: {v}\r\n" for k, v in intent["upload"]["headers"].items())
            stalled.append(
                _stall(
                    server.port,
                    f"PUT {url.path}?{url.query} HTTP/1.1\r\n{host}{headers}Content-Length: {big}\r\n\r\n",
                    JPEG_HEAD,
                )
            )
        stalled.append(
            _stall(
                server.port,
                f"PATCH {urlsplit(tus.headers['Location']).path} HTTP/1.1\r\n{host}"
                f"Authorization: Token {token}\r\nTus-Resumable: 1.0.0\r\n"
                f"Upload-Offset: 0\r\nContent-Type: application/offset+octet-stream\r\n"
                f"Content-Length: {big}\r\n\r\n",
                JPEG_HEAD,
            )
        )
        stalled.append(
            _stall(
                server.port,
                f"POST /api/v1/attachments HTTP/1.1\r\n{host}"  # upload-through
                f"Authorization: Token {token}\r\n"
                f"Content-Type: multipart/form-data; boundary=xyz\r\n"
                f"Content-Length: {big}\r\n\r\n",
                b"--xyz\r\n",
            )
        )
        for _ in range(2):  # small JSON bodies (intents)
            stalled.append(
                _stall(
                    server.port,
                    f"POST /api/v1/uploads HTTP/1.1\r\n{host}"
                    f"Authorization: Token {token}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: 200\r\n\r\n",
                    b'{"profile": ',
                )
            )
        time.sleep(1.5)  # every stalled request is inside its view or the body reader by now

        started = time.monotonic()
        status = requests.get(f"{server.base}/api/v1/attachments/{intents[0]['id']}", headers=auth, timeout=10)
        intent = requests.post(
            f"{server.base}/api/v1/uploads",
            headers=auth,
            timeout=10,
            json={"profile": "image", "filename": "b.jpg", "size": 10, "content_type": "image/jpeg"},
        )
        elapsed = time.monotonic() - started
        assert (status.status_code, intent.status_code) == (200, 201), (status.text, intent.text)
        assert elapsed < 2.5, f"other requests waited for a pooled connection: {elapsed:.1f} s"
    finally:
        for sock in stalled:
            sock.close()
        server.stop()
