"""`manage.py serve`'s HTTP side: gunicorn, embedded through its application API.

gthread workers: a bounded pool of threads per process (AIRLOCK_WEB_THREADS),
keep-alive connections parked in the worker's selector (no thread each), a
connection that sends nothing for 5 s parked too. On top of gunicorn:
  - header deadline: a request whose headers are not complete within
    AIRLOCK_HTTP_HEADER_TIMEOUT_SECONDS is cut off (a slow-header client cannot
    keep a thread);
  - body timeout: AIRLOCK_HTTP_BODY_TIMEOUT_SECONDS between two reads of a body;
  - a client's next request on a kept-alive connection, if it comes within
    KEEPALIVE_LINGER_SECONDS, is served by the same thread;
  - new connections go to the process holding the fewest (ConnectionShares);
  - graceful stop: SIGTERM stops accepting, wakes `?wait=` requests so they
    answer at once, lets in-flight requests finish (AIRLOCK_GRACEFUL_TIMEOUT_SECONDS),
    then the process's job runtime (if any) hands its leases back.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import select
import socket
import threading
import time
from collections.abc import Callable

from django.conf import settings
from gunicorn.app.base import BaseApplication
from gunicorn.workers.gthread import ThreadWorker


# How long the thread that answered a kept-alive request waits for that client's next one.
KEEPALIVE_LINGER_SECONDS = 0.005
# How long a process holding more connections than a sibling leaves a new one to that sibling.
ACCEPT_DEFER_SECONDS = 0.001


class ConnectionShares:
    """How many connections each web process holds, in memory the processes share (made before the fork).

    A kept-alive connection stays with the process that accepted it, and the
    processes race for each new one. Left to the race, 2 keep-alive clients
    landed in the same process in 3 rounds of 4: that process queued both on
    its one GIL (212 status reads/s, 4.3 ms of CPU each) while its sibling
    idled (411/s, 3.6 ms, when they were split). A process that holds more
    connections than its least-loaded sibling waits ACCEPT_DEFER_SECONDS
    before accepting, so the sibling takes the connection; if the sibling does
    not, this process does (nginx's accept_disabled, with a view of the siblings).
    """

    def __init__(self, processes: int) -> None:
        slots = processes + 2  # room for a replacement starting before a crashed process's slot is reused
        self._pids = multiprocessing.RawArray(ctypes.c_int, slots)
        self._counts = multiprocessing.RawArray(ctypes.c_int, slots)
        self._lock = multiprocessing.Lock()
        self.slot = -1

    def claim(self) -> None:
        """Take a slot for this process: a free one, or one whose process is gone."""
        with self._lock:
            for i, pid in enumerate(self._pids):
                if pid == 0 or not _alive(pid):
                    self._pids[i], self._counts[i], self.slot = os.getpid(), 0, i
                    return

    def release(self) -> None:
        if self.slot >= 0:
            with self._lock:
                self._pids[self.slot] = self._counts[self.slot] = 0
            self.slot = -1

    def publish(self, connections: int) -> None:
        if self.slot >= 0:
            self._counts[self.slot] = connections

    def sibling_holds_fewer(self, connections: int) -> bool:
        mine = self.slot
        return mine >= 0 and any(pid and i != mine and self._counts[i] < connections
                                 for i, pid in enumerate(self._pids))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process: alive
    return True


class AirlockThreadWorker(ThreadWorker):
    """gthread plus a deadline on reading the request headers, a timeout on body reads, balanced accepts."""

    shares: ConnectionShares | None = None  # set in the arbiter (AirlockServer), inherited across the fork

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._reading_headers: dict[int, tuple[float, object]] = {}  # thread id -> (since, connection)

    def init_process(self):
        if self.shares is not None:
            self.shares.claim()
        super().init_process()

    def run(self):
        try:
            super().run()
        finally:
            if self.shares is not None:
                self.shares.release()

    def accept(self, listener):
        shares = self.shares
        if shares is not None and shares.sibling_holds_fewer(self.nr_conns):
            time.sleep(ACCEPT_DEFER_SECONDS)  # the listener is non-blocking: if the sibling took it, nothing happens
        super().accept(listener)
        if shares is not None:
            shares.publish(self.nr_conns)

    def handle(self, conn):
        while True:
            self._reading_headers[threading.get_ident()] = (time.monotonic(), conn)
            try:
                keep = super().handle(conn)
            finally:
                self._reading_headers.pop(threading.get_ident(), None)
            if not (keep is True and self.alive and self._next_request_soon(conn)):
                return keep

    @staticmethod
    def _next_request_soon(conn) -> bool:
        """Whether the client sent its next request within KEEPALIVE_LINGER_SECONDS (then this thread serves it).

        Back through gthread's selector, a kept-alive request costs a pipe write,
        two thread wake-ups and two epoll registrations: 0.5-0.8 ms of CPU per
        status read on this 2-core machine. Served by the thread that answered
        the last one, `serve` answered 510-560 status reads/s instead of 375-380
        (bench/serve_bench.py --only ratio, 8 keep-alive clients). The next
        request's headers are under the same deadline as any other.
        """
        if conn.parser.unreader.buf.getvalue():
            return False  # read-ahead bytes: gthread's own path handles them
        try:
            readable, _, _ = select.select([conn.sock], [], [], KEEPALIVE_LINGER_SECONDS)
        except (OSError, ValueError):
            return False
        return bool(readable)

    def handle_request(self, req, conn):
        # The headers are in: from here on only the body timeout applies.
        self._reading_headers.pop(threading.get_ident(), None)
        conn.sock.settimeout(settings.AIRLOCK_HTTP_BODY_TIMEOUT_SECONDS)
        return super().handle_request(req, conn)

    def murder_pending(self):
        super().murder_pending()
        if self.shares is not None:  # once per pass of the event loop: connections closed since count too
            self.shares.publish(self.nr_conns)
        limit = settings.AIRLOCK_HTTP_HEADER_TIMEOUT_SECONDS
        now = time.monotonic()
        for ident, entry in list(self._reading_headers.items()):
            since, conn = entry
            if now - since > limit and self._reading_headers.get(ident) is entry:
                try:  # the blocked read returns at once; the thread closes the connection
                    conn.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def handle_exit(self, sig, frame):
        from attachments import waiting

        waiting.stop_listener()  # `?wait=` requests answer now instead of holding the shutdown
        super().handle_exit(sig, frame)


class AirlockServer(BaseApplication):
    def __init__(self, app: Callable, options: dict) -> None:
        self.application = app
        self.options = options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)
        AirlockThreadWorker.shares = ConnectionShares(self.cfg.workers) if self.cfg.workers > 1 else None

    def load(self):
        return self.application


def options(*, bind: str, processes: int, on_ready: Callable[[], None],
            post_worker_init: Callable[[object], None] | None = None,
            worker_exit: Callable[[object], None] | None = None,
            on_exit: Callable[[], None] | None = None) -> dict:
    return {
        "bind": [bind],
        "workers": processes,
        "worker_class": "ops.httpserver.AirlockThreadWorker",
        "threads": settings.AIRLOCK_WEB_THREADS,
        # Connections one process keeps (busy + kept alive): beyond it, the kernel's backlog.
        "worker_connections": settings.AIRLOCK_WEB_THREADS + 1000,
        "backlog": 2048,
        "keepalive": settings.AIRLOCK_HTTP_KEEPALIVE_SECONDS,
        "timeout": 120,  # a worker process that stops responding entirely is replaced
        "graceful_timeout": settings.AIRLOCK_GRACEFUL_TIMEOUT_SECONDS,
        "accesslog": None,  # access logs are the proxy's job
        "errorlog": "-",
        "loglevel": "warning",
        "control_socket_disable": True,
        "proc_name": "airlock",
        "when_ready": lambda arbiter: on_ready(),
        "post_worker_init": (lambda worker: post_worker_init(worker)) if post_worker_init else (lambda worker: None),
        "worker_exit": (lambda arbiter, worker: worker_exit(worker)) if worker_exit else (lambda a, w: None),
        "on_exit": (lambda arbiter: on_exit()) if on_exit else (lambda arbiter: None),
    }
