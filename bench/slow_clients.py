#!/usr/bin/env python
"""/healthz and an authenticated GET while 500 slow clients trickle, against `manage.py serve`.

    .venv/bin/python bench/slow_clients.py [--quick] [--clients N] [--seconds S]

Starts `manage.py serve --no-worker --no-scheduler` on the environment it is given
(bench/run.py: the embedded defaults, AIRLOCK_WEB_PROCESSES web processes of
AIRLOCK_WEB_THREADS threads; one before serve ran several on SQLite) with its default deadlines and limits, and
opens N sockets on the
loopback that send a byte each per second:
  - 40 %: headers, never finished (cut after AIRLOCK_HTTP_HEADER_TIMEOUT_SECONDS);
  - 50 %: complete headers of an intent, then its 200-byte JSON body;
  - 10 %: complete headers of a tus PATCH of 3 MiB (streamed by the view: each
    holds a request thread, up to the address's share of threads).
A socket the server closes is replaced at once, so N stay open all along. Then,
for S seconds, one client (keep-alive, the same address) alternates GET /healthz
and GET /api/v1/attachments with a token, 20 times a second, each timed.
slow_clients_healthz_p99_s is the healthz p99 (goal: <= 0.5); the same p99
with no slow client, measured first, is the baseline. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import resource
import socket
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.common import createuser, emit, local_env, percentile, r, scratch_dir, serve  # noqa: E402
from tests.support.processes import tus_create  # noqa: E402

MIB = 1 << 20


class SlowClients:
    """N trickling sockets, replaced when the server closes one, for at most `limit_s` seconds."""

    def __init__(self, port: int, token: str, tus_paths: list[str], n: int, limit_s: float) -> None:
        self.port, self.token, self.tus_paths, self.n = port, token, tus_paths, n
        self.sockets: list[socket.socket | None] = [None] * n
        self.replaced = 0
        self.open_counts: list[int] = []
        self.stop = threading.Event()
        self.until = time.monotonic() + limit_s
        for i in range(n):
            self._open(i)
        self.thread = threading.Thread(target=self._trickle, daemon=True)
        self.thread.start()

    def _head(self, i: int) -> bytes:
        host = f"Host: 127.0.0.1:{self.port}\r\n"
        kind = i % 10
        if kind < 4:
            return f"POST /api/v1/uploads HTTP/1.1\r\n{host}X-Slow: ".encode()
        if kind < 9:
            return (
                f"POST /api/v1/uploads HTTP/1.1\r\n{host}Authorization: Token {self.token}\r\n"
                f"Content-Type: application/json\r\nContent-Length: 200\r\n\r\n{{"
            ).encode()
        path = self.tus_paths[(i // 10) % len(self.tus_paths)]
        return (
            f"PATCH {path} HTTP/1.1\r\n{host}Authorization: Token {self.token}\r\nTus-Resumable: 1.0.0\r\n"
            f"Upload-Offset: 0\r\nContent-Type: application/offset+octet-stream\r\n"
            f"Content-Length: {3 * MIB}\r\n\r\n"
        ).encode()

    def _open(self, i: int) -> None:
        try:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=2)
            sock.sendall(self._head(i))
            sock.setblocking(False)
            self.sockets[i] = sock
        except OSError:
            self.sockets[i] = None

    def _trickle(self) -> None:
        while not self.stop.is_set() and time.monotonic() < self.until:
            for i, sock in enumerate(self.sockets):
                if self.stop.is_set():
                    return
                alive = sock is not None
                if sock is not None:
                    try:
                        if sock.recv(65536) == b"":  # answered or closed by the server
                            alive = False
                    except BlockingIOError:
                        pass
                    except OSError:
                        alive = False
                    if alive:
                        try:
                            sock.send(b"a")
                        except OSError:
                            alive = False
                if not alive:
                    if sock is not None:
                        sock.close()
                    self.replaced += 1
                    self._open(i)
            self.open_counts.append(sum(s is not None for s in self.sockets))
            self.stop.wait(1.0)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        for sock in self.sockets:
            if sock is not None:
                sock.close()


def probe(base: str, token: str, seconds: float) -> tuple[list[float], list[float], int]:
    """(healthz latencies, authenticated GET latencies, failures) over `seconds`."""
    import requests

    session = requests.Session()
    auth = {"Authorization": f"Token {token}"}
    health: list[float] = []
    api: list[float] = []
    failures = 0
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        for url, headers, out in ((f"{base}/healthz", {}, health), (f"{base}/api/v1/attachments", auth, api)):
            started = time.perf_counter()
            try:
                ok = session.get(url, headers=headers, timeout=10).status_code == 200
            except requests.RequestException:
                ok = False
            out.append(time.perf_counter() - started)
            failures += not ok
        time.sleep(0.05)
    return health, api, failures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--clients", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=None)
    args = parser.parse_args()
    seconds = args.seconds or (12.0 if args.quick else 30.0)

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 2 * args.clients + 512  # this process and serve (which inherits the limit)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want if hard == resource.RLIM_INFINITY else min(want, hard), hard))

    tmp = scratch_dir("slow-clients-bench-")
    env = local_env(tmp)
    server = serve(env, tmp, "--no-worker", "--no-scheduler")
    base, port = server.base, server.port
    slow = None
    try:
        token = createuser(env, "bench")
        tus_paths = [
            urlsplit(tus_create(base, token, 3 * MIB, timeout=30).headers["Location"]).path
            for _ in range(max(1, args.clients // 10))
        ]

        idle_health, idle_api, idle_failures = probe(base, token, min(5.0, seconds))
        slow = SlowClients(port, token, tus_paths, args.clients, seconds + 30)
        time.sleep(2.0)  # two rounds of bytes: the slow requests are wherever the server keeps them
        health, api, failures = probe(base, token, seconds)
        open_counts = list(slow.open_counts)
        replaced = slow.replaced
        alive = server.proc.poll() is None
        emit(
            {
                "slow_clients_healthz_p99_s": r(percentile(health, 99)),
                "slow_clients_healthz_p50_s": r(percentile(health, 50)),
                "slow_clients_auth_get_p99_s": r(percentile(api, 99)),
                "slow_clients_auth_get_p50_s": r(percentile(api, 50)),
                "slow_clients_failures": failures,
                "slow_clients_idle_healthz_p99_s": r(percentile(idle_health, 99)),
                "slow_clients_idle_auth_get_p99_s": r(percentile(idle_api, 99)),
                "slow_clients_idle_failures": idle_failures,
                "slow_clients_open_min": min(open_counts) if open_counts else None,
                "slow_clients_replaced": replaced,
                "slow_clients_requests": len(health) + len(api),
                "slow_clients_n": args.clients,
                "slow_clients_seconds": seconds,
                "slow_clients_server_alive": alive,
            }
        )
    finally:
        if slow is not None:
            slow.close()
        server.stop()


if __name__ == "__main__":
    main()
