"""A body that a view streams in (signed PUT, tus PATCH, upload-through) has a total deadline too.

The timeout on each read (AIRLOCK_HTTP_LIMITS.body_timeout_seconds) alone let a client
send a byte every 29 s and keep its thread for as long as the body lasted. Each
body now has body_allowance(its size) in all (ops/httpintake.py): a fixed
AIRLOCK_HTTP_LIMITS.body_deadline_seconds plus its size at
AIRLOCK_HTTP_LIMITS.body_min_bytes_per_second, so a 2 GB file over a slow phone link
still goes through while a trickle does not. Past it, the read in progress is
woken (the worker's main loop shuts the socket's read side) and fails with
BodyTooSlow, a TimeoutError: the views and the body-first middleware answer
408 REQUEST_TIMEOUT for it, as for a body that stopped arriving.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator

from django.conf import settings

from ops.httpintake import body_allowance

# A chunked body's size is unknown: it may always take the time of what it sent plus this much more.
CHUNKED_WINDOW_BYTES = 64 * 1024


class BodyTooSlow(TimeoutError):
    pass


class DeadlineInput:
    """`wsgi.input` that fails with BodyTooSlow once the body is past its total deadline."""

    def __init__(self, stream, sock: socket.socket, length: int | None, started: float) -> None:
        self._stream = stream
        self._sock = sock
        self._length = length
        self._started = started
        self.received = 0
        self.expired = False
        self.complete = False  # all of it read: the view may take its time, the deadline is met

    def deadline(self) -> float:
        size = self._length if self._length is not None else self.received + CHUNKED_WINDOW_BYTES
        return self._started + body_allowance(size)

    def expire(self) -> None:
        """Called from the worker's main loop: wake the read in progress, if any."""
        self.expired = True
        try:
            self._sock.shutdown(socket.SHUT_RD)  # the answer can still be written
        except OSError:
            pass

    def _call(self, read: Callable, size: int) -> bytes:
        if self.complete:
            return read(size)  # b"": nothing is left to wait for
        left = self.deadline() - time.monotonic()
        if self.expired or left <= 0:
            self.expired = True
            raise BodyTooSlow("The request body did not arrive in time.")
        self._sock.settimeout(min(settings.AIRLOCK_HTTP_LIMITS.body_timeout_seconds, left))
        try:
            data = read(size)
        except Exception as exc:
            if self.expired:
                raise BodyTooSlow("The request body did not arrive in time.") from exc
            raise
        if self.expired:  # the read side was shut: what came back is short
            raise BodyTooSlow("The request body did not arrive in time.")
        self.received += len(data)
        if not data or (self._length is not None and self.received >= self._length):
            self.complete = True
            self._sock.settimeout(settings.AIRLOCK_HTTP_LIMITS.body_timeout_seconds)  # for writing the answer
        return data

    def read(self, size: int | None = -1) -> bytes:
        return self._call(self._stream.read, -1 if size is None else size)

    def readline(self, size: int | None = -1) -> bytes:
        return self._call(self._stream.readline, -1 if size is None else size)

    def readlines(self, hint: int | None = -1) -> list[bytes]:
        return list(self)

    def __iter__(self) -> Iterator[bytes]:
        while line := self.readline():
            yield line


class BodyDeadlines:
    """The bodies being read in this process, for the worker's main loop to cut off when overdue."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inputs: set[DeadlineInput] = set()

    def add(self, body: DeadlineInput) -> None:
        with self._lock:
            self._inputs.add(body)

    def discard(self, body: DeadlineInput) -> None:
        with self._lock:
            self._inputs.discard(body)

    def expire_overdue(self, now: float) -> None:
        with self._lock:
            overdue = [body for body in self._inputs if not (body.expired or body.complete) and now > body.deadline()]
        for body in overdue:
            body.expire()


DEADLINES = BodyDeadlines()


class BodyDeadlineApp:
    """WSGI wrapper: every request with a body reads it through a DeadlineInput."""

    def __init__(self, app: Callable) -> None:
        self.app = app

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        sock = environ.get("gunicorn.socket")
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        raw_length = environ.get("CONTENT_LENGTH") or ""
        length = int(raw_length) if raw_length.isdigit() else None
        if sock is None or not (chunked or length):
            return self.app(environ, start_response)
        body = DeadlineInput(environ["wsgi.input"], sock, None if chunked else length, time.monotonic())
        environ["wsgi.input"] = body
        DEADLINES.add(body)
        try:
            return self.app(environ, start_response)
        finally:
            DEADLINES.discard(body)
