"""Clients that trickle their headers or bodies hold no request thread, and every body has a total deadline.

Before, the body-first middleware read a small body on a request thread before
authentication, with a timeout only between two reads: 135 sockets sending a
byte every ~18 s held all 128 threads of a web process and /healthz stopped
answering. `serve` now gathers headers and small bodies in its selector under
total deadlines (ops/httpintake.py), bounds the threads and connections of one
client address, and cuts a streamed body off at its size's allowance
(ops/bodydeadline.py). Everything runs over the loopback.
"""

from __future__ import annotations

import json
import resource
import socket
import threading
import time
from urllib.parse import urlsplit

import pytest
import requests

from tests.support.processes import tus_create

from .test_serve import Server

pytestmark = pytest.mark.slow

SLOW_CLIENTS = 500
MIB = 1 << 20


def _enough_file_descriptors(n: int) -> None:
    """The server (a child: it inherits the limit) and this process each hold one descriptor per slow client."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = n + 512
    if soft != resource.RLIM_INFINITY and soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            pytest.fail(f"RLIMIT_NOFILE hard limit {hard} is below the {want} descriptors this test needs")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


class Tricklers:
    """SLOW_CLIENTS sockets: half trickle their headers, half a small JSON body after complete headers."""

    def __init__(self, port: int, token: str) -> None:
        self.sockets: list[socket.socket] = []
        self.alive: list[bool] = []
        self.stop = threading.Event()
        self.trickling = threading.Event()  # set once a second round of bytes went out
        host = f"Host: 127.0.0.1:{port}\r\n"
        for n in range(SLOW_CLIENTS):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            if n % 2:
                sock.sendall(f"POST /api/v1/uploads HTTP/1.1\r\n{host}X-Slow: ".encode())
            else:
                sock.sendall(
                    f"POST /api/v1/uploads HTTP/1.1\r\n{host}Authorization: Token {token}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: 200\r\n\r\n{{".encode()
                )
            self.sockets.append(sock)
            self.alive.append(True)
        self.thread = threading.Thread(target=self._trickle, daemon=True)
        self.thread.start()

    def _trickle(self) -> None:
        deadline = time.monotonic() + 60
        rounds = 0
        while not self.stop.is_set() and time.monotonic() < deadline:
            for i, sock in enumerate(self.sockets):  # a byte each, every second
                if self.alive[i]:
                    try:
                        sock.send(b"a")
                    except OSError:
                        self.alive[i] = False
            rounds += 1
            if rounds == 2:
                self.trickling.set()
            self.stop.wait(1.0)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        for sock in self.sockets:
            sock.close()


def test_500_slow_clients_leave_healthz_and_authenticated_requests_answering(tmp_path):
    _enough_file_descriptors(2 * SLOW_CLIENTS)
    # One web process: all the slow clients land on the same 128 threads.
    server = Server(tmp_path, {"AIRLOCK_SERVE": {"web_processes": 1}})
    tricklers = None
    try:
        token = server.createuser("patient", "slow")
        auth = {"Authorization": f"Token {token}"}
        tricklers = Tricklers(server.port, token)
        assert tricklers.trickling.wait(30)  # the slow requests are wherever the server keeps them
        health, api = requests.Session(), requests.Session()
        latencies: list[float] = []
        failures: list[str] = []
        until = time.monotonic() + 6
        while time.monotonic() < until:
            for session, url, headers in (
                (health, f"{server.base}/healthz", {}),
                (api, f"{server.base}/api/v1/attachments", auth),
            ):
                started = time.monotonic()
                try:
                    response = session.get(url, headers=headers, timeout=4)
                    if response.status_code != 200:
                        failures.append(f"{url}: {response.status_code} {response.text[:100]}")
                except requests.RequestException as exc:
                    failures.append(f"{url}: {type(exc).__name__}")
                latencies.append(time.monotonic() - started)
            time.sleep(0.05)
        assert not failures, failures[:5]
        latencies.sort()
        p90 = latencies[int(0.9 * (len(latencies) - 1))]
        assert p90 < 0.5 and latencies[-1] < 2.0, f"p90 {p90:.2f} s, max {latencies[-1]:.2f} s"
        # The slow clients were held, not refused: each is still being read (within its deadlines).
        assert sum(tricklers.alive) >= 0.95 * SLOW_CLIENTS, f"{SLOW_CLIENTS - sum(tricklers.alive)} cut off"
    finally:
        if tricklers is not None:
            tricklers.close()
        server.stop()


# Short deadlines: a body gets 2 s plus its size at 1 MB/s. Per-address limits small enough to reach.
DEADLINE_ENV = {
    "AIRLOCK_SERVE": {"web_processes": 1},
    "AIRLOCK_HTTP_LIMITS": {
        "body_deadline_seconds": 2,
        "body_min_bytes_per_second": 1000000,
        "connections_per_address": 12,
        "threads_per_address": 2,
    },
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    started = Server(tmp_path_factory.mktemp("serve-slow"), DEADLINE_ENV)
    yield started
    started.stop()


@pytest.fixture(scope="module")
def token(server) -> str:
    return server.createuser("trickle", "slow")


def _trickle_until_answered(sock: socket.socket, limit_s: float) -> tuple[float, bytes]:
    """Send a byte every 0.2 s until the server answers (or limit_s passes); (seconds, answer)."""
    started = time.monotonic()
    sock.settimeout(0.2)
    answer = b""
    while time.monotonic() - started < limit_s:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            try:
                sock.send(b"0")
            except OSError:
                pass  # closed by the server: its answer is in the receive buffer
            continue
        except ConnectionResetError:
            break
        if not chunk:
            break
        answer += chunk
    return time.monotonic() - started, answer


def _json_answer(answer: bytes) -> tuple[int, dict]:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 "), answer[:200]
    return int(head.split(b" ", 2)[1]), json.loads(body)


def test_a_small_body_that_keeps_trickling_past_its_deadline_is_a_408(server, token):
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(
            f"POST /api/v1/uploads HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Token {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: 200\r\n\r\n{{".encode()
        )
        seconds, answer = _trickle_until_answered(sock, 12)
    status, body = _json_answer(answer)
    assert status == 408 and body["error"]["code"] == "REQUEST_TIMEOUT", answer[:300]
    assert seconds < 5, f"answered after {seconds:.1f} s (the deadline is 2 s)"


def _tus_upload(server, token: str, size: int) -> str:
    return urlsplit(tus_create(server.base, token, size).headers["Location"]).path


def test_a_streamed_body_that_keeps_trickling_past_its_deadline_is_a_408(server, token):
    size = 3 * MIB  # the tus view streams it (any size); allowance 2 s + 3.1 s
    path = _tus_upload(server, token, size)
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(
            f"PATCH {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Token {token}\r\nTus-Resumable: 1.0.0\r\nUpload-Offset: 0\r\n"
            f"Content-Type: application/offset+octet-stream\r\nContent-Length: {size}\r\n\r\n"
            "\xff\xd8\xff\xe0".encode("latin-1")
        )
        seconds, answer = _trickle_until_answered(sock, 15)
    status, body = _json_answer(answer)
    assert status == 408 and body["error"]["code"] == "REQUEST_TIMEOUT", answer[:300]
    assert seconds < 9, f"answered after {seconds:.1f} s (the deadline is 5.1 s)"


def test_connections_beyond_the_per_address_limit_are_a_429(server):
    held = []
    try:
        for _ in range(12):  # each answered once (so surely accepted), then kept alive
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")
            held.append(sock)
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as extra:
            extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            answer = b""
            while chunk := extra.recv(65536):
                answer += chunk
        status, body = _json_answer(answer)
        assert status == 429 and body["error"]["code"] == "RATE_LIMITED", answer[:300]
    finally:
        for sock in held:
            sock.close()
    # Closed, they count no more (the server notices on its next pass): the address is served again.
    statuses = []
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and 200 not in statuses:
        statuses.append(requests.get(f"{server.base}/healthz", timeout=5).status_code)
    assert statuses[-1] == 200, statuses


def _locked(server, token: str, path: str) -> bool:
    """Whether a PATCH is being received for this upload (asked from another address: 127.0.0.2)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5, source_address=("127.0.0.2", 0)) as sock:
        sock.sendall(
            f"PATCH {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Token {token}\r\n"
            f"Tus-Resumable: 1.0.0\r\nUpload-Offset: 0\r\nContent-Type: application/offset+octet-stream"
            f"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode()
        )
        return sock.recv(65536).startswith(b"HTTP/1.1 423")


def test_an_address_holding_its_share_of_threads_does_not_delay_another(server, token):
    """2 streamed bodies from 127.0.0.1 hold its 2 threads: its next request waits, 127.0.0.2's does not."""
    tus_urls = [_tus_upload(server, token, 3 * MIB) for _ in range(2)]
    slow = []
    try:
        for path in tus_urls:
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            sock.sendall(
                f"PATCH {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Token {token}\r\n"
                f"Tus-Resumable: 1.0.0\r\nUpload-Offset: 0\r\nContent-Type: application/offset+octet-stream"
                f"\r\nContent-Length: {3 * MIB}\r\n\r\n".encode()
            )
            slow.append(sock)
        deadline = time.monotonic() + 5  # until both PATCHes are in their views, reading
        while not all(_locked(server, token, path) for path in tus_urls) and time.monotonic() < deadline:
            pass
        other = socket.create_connection(("127.0.0.1", server.port), timeout=5, source_address=("127.0.0.2", 0))
        with other:
            started = time.monotonic()
            other.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            assert other.recv(65536).startswith(b"HTTP/1.1 200"), "another address waited"
            assert time.monotonic() - started < 1.0
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as same:
            same.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            same.settimeout(0.5)
            with pytest.raises(TimeoutError):
                same.recv(65536)  # waits in the selector for one of its address's threads
            slow.pop().close()  # one PATCH ends: its thread is free
            same.settimeout(5)
            assert same.recv(65536).startswith(b"HTTP/1.1 200")
    finally:
        for sock in slow:
            sock.close()
