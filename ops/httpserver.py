"""`manage.py serve`'s HTTP side: gunicorn, embedded through its application API.

gthread workers: a bounded pool of threads per process (AIRLOCK_SERVE.web_threads),
keep-alive connections parked in the worker's selector (no thread each). On
top of gunicorn:
  - intake: a request's headers, and its body when small, are gathered in the
    selector without a thread, under total deadlines (ops/httpintake.py); a
    thread only takes a request that is all there, or one whose body a view
    streams (signed PUT, tus) or is large: that body has a total deadline as
    well (ops/bodydeadline.py);
  - per client address: at most AIRLOCK_HTTP_LIMITS.connections_per_address open
    connections (429 beyond) and AIRLOCK_HTTP_LIMITS.threads_per_address threads
    (further complete requests wait in the selector for one of them);
  - gunicorn's own refusals (400, 414, 431, 501...) in the JSON error shape;
  - graceful stop: SIGTERM stops accepting, wakes `?wait=` requests so they
    answer at once, lets in-flight requests finish (AIRLOCK_HTTP_LIMITS.graceful_timeout_seconds),
    then the process's job runtime (if any) hands its leases back.
A kept-alive client's next request goes back through gthread's selector, and
the web processes race for new connections, as in plain gthread: a thread that
lingers for the next request or an accept balancer would add code for no
consistent gain (bench/serve_bench.py compares serve with plain gunicorn).
"""

from __future__ import annotations

import errno
import selectors
import socket
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from functools import partial

from django.conf import settings
from gunicorn import util
from gunicorn.app.base import BaseApplication
from gunicorn.http2 import negotiation
from gunicorn.workers.gthread import TConn, ThreadWorker

from attachments.api.outages import RETRY_AFTER_SECONDS
from ops import httperrors
from ops.bodydeadline import DEADLINES, BodyDeadlineApp
from ops.httpintake import Intake


class AirlockConn(TConn):
    """A gthread connection that counts itself among its client address's open connections until it closes."""

    def __init__(self, cfg, sock, client, server, address: str, open_counts: Counter[str]) -> None:
        super().__init__(cfg, sock, client, server)
        self.address = address
        self.gathered = b""  # request bytes read in the selector: the thread's parser reads them first
        self._open_counts = open_counts
        open_counts[address] += 1
        self._counted = True

    def release(self) -> None:
        """No longer one of its address's open connections (closed, or only lingering to be closed)."""
        if self._counted:
            self._counted = False
            self._open_counts[self.address] -= 1
            if self._open_counts[self.address] <= 0:
                del self._open_counts[self.address]

    def close(self, graceful=False):
        self.release()
        super().close(graceful)


# How often the main loop looks for overdue intakes and bodies (it runs on every event).
DEADLINE_CHECK_SECONDS = 0.25
# A connection answered by the main loop itself (408, 429) is read and discarded this long before it
# is closed: closed with the client's bytes unread, the kernel resets it and the answer is lost.
LINGER_SECONDS = 1.0
LINGER_MAX = 256  # lingering connections at once; beyond, closed at once
# Bytes all the requests being gathered may hold in a process. Beyond, a request goes to a thread as
# it is (as before the selector gathered anything): still under its deadlines and its address's share
# of threads. Without it, one address's 512 connections could park 512 almost-whole 2 MiB bodies.
GATHER_BUDGET_BYTES = 64 << 20


def _head_limit(cfg) -> int:
    """At most the bytes of a request line and headers gunicorn's parser accepts (then it refuses: 414/431)."""
    line = cfg.limit_request_line if cfg.limit_request_line > 0 else 8190
    fields = cfg.limit_request_fields if 0 < cfg.limit_request_fields <= 32768 else 32768
    size = cfg.limit_request_field_size if cfg.limit_request_field_size > 0 else 8190
    return line + 2 + fields * (size + 2) + 4


class AirlockThreadWorker(ThreadWorker):
    """gthread: requests gathered before a thread takes them, per-address limits, JSON refusals."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._reading_headers: dict[int, tuple[float, object]] = {}  # thread id -> (since, connection)
        # The rest is only touched by the main thread (the selector's loop).
        self._intakes: dict[AirlockConn, Intake] = {}  # connections being gathered, registered in the selector
        self._open_per_address: Counter[str] = Counter()
        self._threads_per_address: Counter[str] = Counter()
        self._waiting_for_thread: dict[str, deque[AirlockConn]] = {}
        self._lingering: dict[socket.socket, float] = {}  # answered, closing: socket -> close by then
        self._gathered_bytes = 0  # held by the intakes
        self._head_limit = _head_limit(self.cfg)
        self._next_deadline_check = 0.0

    # --- main thread: accepting, gathering, handing to threads -------------------

    def accept(self, listener):
        try:
            sock, client = listener.accept()
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        address = client[0] if isinstance(client, tuple) else ""
        limit = settings.AIRLOCK_HTTP_LIMITS.connections_per_address
        if limit and self._open_per_address[address] >= limit:
            self._answer_and_close(sock, httperrors.too_many_connections(limit, RETRY_AFTER_SECONDS))
        else:
            self.nr_conns += 1
            self.enqueue_req(
                AirlockConn(self.cfg, sock, client, listener.getsockname(), address, self._open_per_address)
            )

    def enqueue_req(self, conn):
        """A connection with a request coming: gather it in the selector first (gthread hands it to a thread)."""
        if self.cfg.is_ssl or negotiation.prior_knowledge_allowed(self.cfg, conn.client):
            self._to_thread(conn)  # the bytes on the socket are not plain HTTP/1: the thread's parser reads them
            return
        now = time.monotonic()
        intake = Intake(conn, self._head_limit, now)
        # What the last request's body drain read ahead is the start of this one.
        ahead = conn.parser.unreader.take_buffered() if conn.parser is not None else b""
        conn.sock.setblocking(False)
        if ahead and self._feed(intake, ahead):
            self._gathered(intake)
        else:
            self._read_into(intake)

    def _feed(self, intake: Intake, data: bytes) -> bool:
        """Whether the request can go to a thread now: it is all there, or gathering must stop."""
        self._gathered_bytes += len(data)
        return intake.feed(data, time.monotonic()) or self._gathered_bytes > GATHER_BUDGET_BYTES

    def _on_intake_readable(self, intake: Intake, _fileobj) -> None:
        self._read_into(intake)

    def _read_into(self, intake: Intake) -> None:
        conn = intake.conn
        try:
            data = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            if conn not in self._intakes:
                self._intakes[conn] = intake
                self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_intake_readable, intake))
            return
        except OSError:
            data = b""
        if not data:  # the client went away
            self._drop_intake(intake)
        elif self._feed(intake, data):
            self._gathered(intake)
        elif conn not in self._intakes:
            self._intakes[conn] = intake
            self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_intake_readable, intake))

    def _gathered(self, intake: Intake) -> None:
        conn = intake.conn
        if self._intakes.pop(conn, None) is not None:
            self.poller.unregister(conn.sock)
        self._gathered_bytes -= len(intake.buf)
        conn.gathered = bytes(intake.buf)
        self._to_thread(conn)

    def _drop_intake(self, intake: Intake, answer: bytes = b"") -> None:
        conn = intake.conn
        self._gathered_bytes -= len(intake.buf)
        if self._intakes.pop(conn, None) is not None:
            try:
                self.poller.unregister(conn.sock)
            except (KeyError, ValueError, OSError):
                pass
        self.nr_conns -= 1
        if answer:
            conn.release()
            self._answer_and_close(conn.sock, answer)
        else:
            conn.close()

    def _answer_and_close(self, sock: socket.socket, answer: bytes) -> None:
        try:
            sock.setblocking(False)
            sock.send(answer)  # small: fits the socket's buffer, never blocks
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            util.close(sock)
            return
        if len(self._lingering) >= LINGER_MAX:
            util.close(sock)
            return
        self._lingering[sock] = time.monotonic() + LINGER_SECONDS
        self.poller.register(sock, selectors.EVENT_READ, self._on_lingering_readable)

    def _on_lingering_readable(self, sock: socket.socket) -> None:
        try:
            while sock.recv(65536):  # discarded
                pass
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            pass
        self._stop_lingering(sock)  # the client closed its side too

    def _stop_lingering(self, sock: socket.socket) -> None:
        if self._lingering.pop(sock, None) is not None:
            try:
                self.poller.unregister(sock)
            except (KeyError, ValueError, OSError):
                pass
        util.close(sock)

    def _to_thread(self, conn) -> None:
        """A thread for this request, or a wait in line if its address already holds its share of threads."""
        limit = settings.AIRLOCK_HTTP_LIMITS.threads_per_address
        address = getattr(conn, "address", "")
        if limit and self._threads_per_address[address] >= limit:
            self._waiting_for_thread.setdefault(address, deque()).append(conn)
            return
        self._threads_per_address[address] += 1
        super().enqueue_req(conn)

    def finish_request(self, conn, fs):
        address = getattr(conn, "address", "")
        self._threads_per_address[address] -= 1
        if self._threads_per_address[address] <= 0:
            del self._threads_per_address[address]
        super().finish_request(conn, fs)
        waiting = self._waiting_for_thread.get(address)
        limit = settings.AIRLOCK_HTTP_LIMITS.threads_per_address
        while waiting and (not limit or self._threads_per_address[address] < limit):
            self._to_thread(waiting.popleft())
        if not waiting:
            self._waiting_for_thread.pop(address, None)

    def murder_pending(self):
        super().murder_pending()
        now = time.monotonic()
        limit = settings.AIRLOCK_HTTP_LIMITS.header_timeout_seconds
        for ident, entry in list(self._reading_headers.items()):
            since, conn = entry
            if now - since > limit and self._reading_headers.get(ident) is entry:
                try:  # the blocked read returns at once; the thread closes the connection
                    conn.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        if now < self._next_deadline_check and self.alive:
            return  # this runs after every event: with hundreds of trickling clients, that is often
        self._next_deadline_check = now + DEADLINE_CHECK_SECONDS
        DEADLINES.expire_overdue(now)
        for sock, until in list(self._lingering.items()):
            if now > until:
                self._stop_lingering(sock)
        for intake in list(self._intakes.values()):
            part = intake.expired(now)
            if part == "body":
                self._drop_intake(intake, httperrors.body_timeout())
            elif part == "headers" or (not self.alive and intake.body_deadline is None):
                self._drop_intake(intake)  # no request yet: closed without an answer, as on a stop

    # --- request threads ---------------------------------------------------------

    def handle(self, conn):
        gathered = getattr(conn, "gathered", b"")
        if gathered:  # the selector read these: the parser starts from them (the socket may have nothing more)
            conn.gathered = b""
            conn.data_ready = True
            conn.sock.setblocking(True)
            conn.init()
            conn.parser.unreader.unread(gathered)
        self._reading_headers[threading.get_ident()] = (time.monotonic(), conn)
        try:
            return super().handle(conn)
        finally:
            self._reading_headers.pop(threading.get_ident(), None)

    def handle_request(self, req, conn):
        # The headers are in: from here on only the body's deadlines apply.
        self._reading_headers.pop(threading.get_ident(), None)
        conn.sock.settimeout(settings.AIRLOCK_HTTP_LIMITS.body_timeout_seconds)
        return super().handle_request(req, conn)

    def handle_error(self, req, client, addr, exc):
        """gunicorn's own refusals, in the contract's JSON error shape instead of its HTML page."""
        status, _ = httperrors.refusal_of(exc)
        if status >= 500:
            self.log.exception("Error handling request")
        else:
            self.log.warning("Invalid request from ip=%s: %s", (addr or ("",))[0], exc)
        try:
            util.write_nonblock(client, httperrors.refusal_for(exc))
        except Exception:  # the client is gone
            self.log.debug("Failed to send error message.")

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

    def load(self):
        return BodyDeadlineApp(self.application)


def options(
    *,
    bind: str,
    processes: int,
    on_ready: Callable[[], None],
    post_worker_init: Callable[[object], None] | None = None,
    worker_exit: Callable[[object], None] | None = None,
    on_exit: Callable[[], None] | None = None,
) -> dict:
    return {
        "bind": [bind],
        "workers": processes,
        "worker_class": "ops.httpserver.AirlockThreadWorker",
        "threads": settings.AIRLOCK_SERVE.web_threads,
        # Connections one process keeps (busy + kept alive): beyond it, the kernel's backlog.
        "worker_connections": settings.AIRLOCK_SERVE.web_threads + 1000,
        "backlog": 2048,
        "keepalive": settings.AIRLOCK_HTTP_LIMITS.keepalive_seconds,
        "timeout": 120,  # a worker process that stops responding entirely is replaced
        "graceful_timeout": settings.AIRLOCK_HTTP_LIMITS.graceful_timeout_seconds,
        # Both through the app's JSON logger and redactor (ops/serverlog.py); access lines are
        # usually the proxy's job, so off unless AIRLOCK_SERVE.access_log.
        "logger_class": "ops.serverlog.ServerLogger",
        "accesslog": "-" if settings.AIRLOCK_SERVE.access_log else None,
        "errorlog": "-",
        "loglevel": "warning",
        "control_socket_disable": True,
        "proc_name": "airlock",
        "when_ready": lambda arbiter: on_ready(),
        "post_worker_init": (lambda worker: post_worker_init(worker)) if post_worker_init else (lambda worker: None),
        "worker_exit": (lambda arbiter, worker: worker_exit(worker)) if worker_exit else (lambda a, w: None),
        "on_exit": (lambda arbiter: on_exit()) if on_exit else (lambda arbiter: None),
    }
