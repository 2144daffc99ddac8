"""`manage.py serve` over real HTTP: inputs that used to give a 500, slow clients, `?wait=` and SIGTERM.

Each test talks to a real `serve` subprocess (tests/e2e/test_serve.py:Server),
in whatever mode the environment selects; raw sockets where a client library
would refuse to send what an attacker sends.
"""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
from urllib.parse import urlsplit

import pytest
import requests

from tests.support import jpeg_bytes
from tests.support.processes import raw

from .test_serve import Server

pytestmark = pytest.mark.slow

# One web process: the waiter caps are counted per process.
EDGE_ENV = {
    "AIRLOCK_HTTP_LIMITS": {"header_timeout_seconds": 2, "waiters_per_user": 2},
    "AIRLOCK_SERVE": {"web_processes": 1},
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    started = Server(tmp_path_factory.mktemp("serve-edges"), EDGE_ENV)
    yield started
    started.stop()


@pytest.fixture(scope="module")
def token(server) -> str:
    return server.createuser("edgy", "edges")


def _auth(token: str) -> dict:
    return {"Authorization": f"Token {token}"}


def _intent(server, token: str, data: bytes) -> dict:
    response = requests.post(
        f"{server.base}/api/v1/uploads",
        headers=_auth(token),
        timeout=10,
        json={"profile": "image", "filename": "a.jpg", "size": len(data), "content_type": "image/jpeg"},
    )
    assert response.status_code == 201, response.text
    return response.json()


def test_deeply_nested_json_is_a_400(server, token):
    deep = b"[" * 100_000 + b"]" * 100_000
    for path in ("/api/v1/uploads", "/api/v1/attachments/commit", "/api/v1/attachments/heartbeat"):
        response = requests.post(
            f"{server.base}{path}", data=deep, timeout=30, headers={**_auth(token), "Content-Type": "application/json"}
        )
        assert response.status_code == 400, (path, response.status_code, response.text[:300])
        assert response.json()["error"]["code"] == "VALIDATION_ERROR"


def test_range_with_thousands_of_digits_is_not_a_500(server, token):
    data = jpeg_bytes((320, 240))
    intent = _intent(server, token, data)
    sent = requests.put(intent["upload"]["url"], data=data, headers=intent["upload"]["headers"], timeout=30)
    assert sent.status_code == 202, sent.text
    url = f"{server.base}/api/v1/attachments/{intent['id']}"
    body = requests.get(f"{url}?wait=30", headers=_auth(token), timeout=40).json()
    assert body["status"] == "ready", body
    huge = "9" * 5000
    expected = {f"bytes={huge}-": 416, f"bytes=0-{huge}": 206, f"bytes=-{huge}": 206}
    for header, status in expected.items():
        got = requests.get(f"{url}/download", headers={**_auth(token), "Range": header}, timeout=10)
        assert got.status_code == status, (header[:20], got.status_code, got.text[:200])


def test_static_path_traversal_is_a_404(server):
    for path in (
        "/static/../../etc/passwd",
        "/static/admin/../../../../etc/passwd",
        "/static/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "/static/admin/css/..%2f..%2f..%2f..%2fetc/passwd",
    ):
        status, body = raw(server.port, f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        assert status in (400, 404), (path, status)
        assert b"root:" not in body
    status, _ = raw(
        server.port, b"GET /static/admin/css/base.css HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    assert status == 200  # WhiteNoise serves the real ones


@pytest.mark.parametrize("length", ["-1", "99999999999999999999999999", "1e3", "+5"])
def test_a_bad_content_length_on_the_upload_put_does_not_use_the_url_up(server, token, length):
    data = jpeg_bytes((64, 48))
    intent = _intent(server, token, data)
    if intent["upload"]["method"] != "PUT" or not intent["upload"]["url"].startswith(server.base):
        pytest.skip("the bytes go to S3 directly: no PUT of ours to send a bad length to")
    parts = urlsplit(intent["upload"]["url"])
    target = f"{parts.path}?{parts.query}"
    status, body = raw(
        server.port,
        (
            f"PUT {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: image/jpeg\r\n"
            f"Content-Length: {length}\r\nConnection: close\r\n\r\n"
        ).encode(),
    )
    assert 400 <= status < 500, (length, status, body[:200])
    again = requests.put(intent["upload"]["url"], data=data, headers=intent["upload"]["headers"], timeout=30)
    assert again.status_code == 202, (length, again.status_code, again.text)


@pytest.mark.parametrize(
    ("request_bytes", "status", "code"),
    [
        (b"NOT A REQUEST\r\n\r\n", 400, "VALIDATION_ERROR"),
        (b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header: x\r\n\r\n", 400, "VALIDATION_ERROR"),
        (b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 414, "ERROR"),
        (
            b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(120)) + b"\r\n",
            431,
            "ERROR",
        ),
        (b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"v" * 9000 + b"\r\n\r\n", 431, "ERROR"),
        (b"POST /api/v1/uploads HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: foo\r\n\r\n", 501, "ERROR"),
    ],
)
def test_the_http_servers_own_refusals_are_in_the_json_error_shape(server, request_bytes, status, code):
    """gunicorn refuses these before the application runs: with our JSON errors, not its HTML page."""
    got, body = raw(server.port, request_bytes)
    assert got == status, (got, body[:200])
    error = json.loads(body)["error"]
    assert error["code"] == code and error["message"] and isinstance(error["details"], dict), error


def test_slow_header_clients_are_cut_off_and_do_not_starve_the_server(server):
    sockets = []
    try:
        for _ in range(20):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and never the blank line
            sockets.append(sock)
        assert requests.get(f"{server.base}/healthz", timeout=5).status_code == 200
        started = time.monotonic()
        for sock in sockets:
            assert sock.recv(1024) == b"", "a connection with unfinished headers was kept open"
        # AIRLOCK_HTTP_LIMITS=header_timeout_seconds=2, checked about once a second.
        assert time.monotonic() - started < 8
    finally:
        for sock in sockets:
            sock.close()


def _read_response(sock: socket.socket) -> tuple[int, bytes]:
    """One HTTP/1.1 response with a Content-Length, read off a kept-alive socket."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"the server closed the connection: {data[:200]!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(
        next(line.split(b":", 1)[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))
    )
    while len(body) < length:
        body += sock.recv(65536)
    return int(head.split(b" ", 2)[1]), body


def test_kept_alive_connections_answer_every_request_whether_it_comes_at_once_or_later(server, token):
    """Next requests sent at once (served by the thread that answered) and after a pause (back via the selector)."""
    ident = _intent(server, token, b"x" * 10)["id"]
    request = (
        f"GET /api/v1/attachments/{ident} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Token {token}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        for pause in (0, 0, 0, 0.05, 0, 0.5, 0, 0):
            time.sleep(pause)
            sock.sendall(request)
            status, body = _read_response(sock)
            assert status == 200 and ident.encode() in body, (pause, status, body[:200])
        # Two requests in one write: the second is read ahead and still answered.
        sock.sendall(request + request)
        assert _read_response(sock)[0] == 200
        assert _read_response(sock)[0] == 200


def test_a_kept_alive_client_that_stalls_in_its_next_headers_is_cut_off(server):
    """The next request's headers, picked up by the answering thread, are under the header deadline too."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=15) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert _read_response(sock)[0] == 200
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and never the blank line
        started = time.monotonic()
        assert sock.recv(1024) == b"", "a kept-alive connection with unfinished headers was kept open"
        # AIRLOCK_HTTP_LIMITS=header_timeout_seconds=2, checked about once a second.
        assert time.monotonic() - started < 8
    assert requests.get(f"{server.base}/healthz", timeout=5).status_code == 200


def test_waiters_are_capped_per_user(server, token):
    ids = [_intent(server, token, b"x" * 10)["id"] for _ in range(3)]
    results: list[int] = []

    def wait(attachment_id: str) -> None:
        response = requests.get(
            f"{server.base}/api/v1/attachments/{attachment_id}?wait=4", headers=_auth(token), timeout=15
        )
        results.append(response.status_code)

    threads = [threading.Thread(target=wait, args=(pk,)) for pk in ids[:2]]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    started = time.monotonic()
    third = requests.get(f"{server.base}/api/v1/attachments/{ids[2]}?wait=4", headers=_auth(token), timeout=15)
    # Past the cap the wait is skipped, not refused: the current state at once.
    assert third.status_code == 200 and third.json()["status"] == "pending", third.text
    assert third.headers["Airlock-Wait"] == "skipped; reason=user-limit; limit=2"
    assert time.monotonic() - started < 3
    for thread in threads:
        thread.join()
    assert results == [200, 200]
    # Waiting without ?wait= is never capped.
    assert requests.get(f"{server.base}/api/v1/attachments/{ids[2]}", headers=_auth(token), timeout=5).ok


def test_a_waiter_wakes_when_its_file_changes(server, token):
    data = jpeg_bytes((200, 150))
    intent = _intent(server, token, data)
    answer: dict = {}

    def wait() -> None:
        started = time.monotonic()
        answer["body"] = requests.get(
            f"{server.base}/api/v1/attachments/{intent['id']}?wait=30", headers=_auth(token), timeout=40
        ).json()
        answer["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=wait)
    thread.start()
    time.sleep(0.5)
    sent = requests.put(intent["upload"]["url"], data=data, headers=intent["upload"]["headers"], timeout=30)
    assert sent.status_code == 202
    thread.join(40)
    # Answered when the file became ready, before the 30 s deadline.
    assert answer["body"]["status"] == "ready" and answer["seconds"] < 29, answer


def test_sigterm_lets_in_flight_requests_finish_and_exits(tmp_path):
    server = Server(tmp_path, {})
    try:
        token = server.createuser("term", "term")
        pending = _intent(server, token, b"x" * 10)["id"]
        answer: dict = {}

        def wait() -> None:
            response = requests.get(
                f"{server.base}/api/v1/attachments/{pending}?wait=25", headers=_auth(token), timeout=40
            )
            answer["status"], answer["at"] = response.status_code, time.monotonic()

        thread = threading.Thread(target=wait)
        thread.start()
        time.sleep(1.0)
        sent = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        thread.join(30)
        # The waiter is answered (not cut off) as soon as the server starts stopping.
        assert answer.get("status") == 200 and answer["at"] - sent < 8, answer
        assert server.proc.wait(timeout=30) == 0
    finally:
        server.stop()
