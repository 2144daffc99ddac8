"""A request's headers and small body, gathered in the worker's selector before a thread takes it.

A thread that reads a request off the socket waits for the client. With a
thread per reading client, 135 clients trickling a small body a byte every
18 s held all 128 threads of a web process and /healthz stopped answering.
Here the bytes are collected without a thread, as they arrive, under total
deadlines (not only a timeout between two reads):
  - the headers: AIRLOCK_HTTP_LIMITS.header_timeout_seconds, then the connection is
    closed without an answer;
  - a body of at most DATA_UPLOAD_MAX_MEMORY_SIZE for a view that does not
    stream it (what the body-first middleware would read before the view
    anyway): body_allowance(its size), and never a pause over
    AIRLOCK_HTTP_LIMITS.body_timeout_seconds; then 408.
Larger, chunked or `Expect: 100-continue` bodies, and those of the views that
stream theirs (signed PUT, tus, upload-through), go to a thread once their
headers are in, under the same total body allowance (ops/bodydeadline.py).
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings

from ops.body_first import path_streams_body

HEAD_END = b"\r\n\r\n"
_REQUEST_LINE = re.compile(rb"[!-~]+ [!-~]+ HTTP/\d\.\d")


def body_allowance(length: int) -> float:
    """Seconds a body of `length` bytes may take in all: a fixed grace plus the time at the minimum rate."""
    return settings.AIRLOCK_HTTP_LIMITS.body_deadline_seconds + length / max(
        1, settings.AIRLOCK_HTTP_LIMITS.body_min_bytes_per_second
    )


def body_to_gather(head: bytes) -> int:
    """Bytes of body to gather before a thread takes the request (0: hand it over with its headers).

    Only a plain, single Content-Length up to DATA_UPLOAD_MAX_MEMORY_SIZE is
    gathered; anything odd goes to gunicorn's parser as it is, to be refused there.
    """
    lines = head.split(b"\r\n")
    length = None
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            continue
        name = name.strip().lower()
        if name in (b"transfer-encoding", b"expect"):
            return 0
        if name == b"content-length":
            value = value.strip()
            if length is not None or not value.isdigit() or len(value) > 15:
                return 0
            length = int(value)
    if not length or length > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
        return 0
    target = lines[0].split(b" ")[1] if lines[0].count(b" ") == 2 else b"/"
    if path_streams_body(target.split(b"?", 1)[0].decode("latin-1")):
        return 0  # tus keeps what arrived of a PATCH cut short, the PUT streams to storage: they read as it comes
    return length


class Intake:
    """The bytes of one request so far, and how long the rest may take."""

    def __init__(self, conn: Any, head_limit: int, now: float, already: bytes = b"") -> None:
        self.conn = conn
        self.head_limit = head_limit
        self.buf = bytearray(already)
        self.header_deadline = now + settings.AIRLOCK_HTTP_LIMITS.header_timeout_seconds
        self.body_deadline: float | None = None  # once the headers are in and a body is being gathered
        self.last_read = now
        self.total: int | None = None  # head + body bytes, once the headers are in

    def feed(self, data: bytes, now: float) -> bool:
        """Add what arrived; whether the request can go to a thread now."""
        self.buf += data
        self.last_read = now
        if self.total is None:
            end = self.buf.find(HEAD_END)
            if end < 0:
                # Over gunicorn's own limits, or not HTTP at all: its parser refuses it with a 4xx at once.
                return len(self.buf) > self.head_limit or not self._request_line_plausible()
            body = body_to_gather(bytes(self.buf[:end]))
            self.total = end + len(HEAD_END) + body
            if body:
                self.body_deadline = now + body_allowance(body)
        return len(self.buf) >= self.total

    def _request_line_plausible(self) -> bool:
        start = bytes(self.buf[:8192]).lstrip(b"\r\n")
        line, sep, _ = start.partition(b"\r\n")
        return not sep or _REQUEST_LINE.fullmatch(line) is not None

    def expired(self, now: float) -> str | None:
        """ "headers" or "body" when that part is past its deadline, else None."""
        if self.body_deadline is None:
            return "headers" if now > self.header_deadline else None
        if now > self.body_deadline or now - self.last_read > settings.AIRLOCK_HTTP_LIMITS.body_timeout_seconds:
            return "body"
        return None
