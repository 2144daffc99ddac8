"""What `serve` gathers in its selector before a thread takes a request, and when it gives up (ops/httpintake.py)."""

from __future__ import annotations

import json

import pytest
from gunicorn.http import errors as g

from ops import httperrors
from ops.httpintake import Intake, body_allowance, body_to_gather

HEAD = b"POST /api/v1/uploads HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"


@pytest.mark.parametrize(
    ("extra", "gathered"),
    [
        (b"Content-Length: 200\r\n", 200),
        (b"content-length:  7 \r\n", 7),
        (b"", 0),  # no body
        (b"Content-Length: 3000000\r\n", 0),  # over DATA_UPLOAD_MAX_MEMORY_SIZE: the view streams it
        (b"Content-Length: 5\r\nContent-Length: 5\r\n", 0),  # odd: the parser refuses it
        (b"Content-Length: -1\r\n", 0),
        (b"Transfer-Encoding: chunked\r\n", 0),
        (b"Content-Length: 10\r\nExpect: 100-continue\r\n", 0),  # the client waits for the 100 first
    ],
)
def test_which_bodies_are_gathered(extra, gathered):
    assert body_to_gather(HEAD + extra) == gathered


@pytest.mark.parametrize(
    "target",
    [
        b"/api/v1/tus/0b5d3c1e-3f7e-4c55-9d0a-1f2e3d4c5b6a",
        b"/api/v1/uploads/0b5d3c1e-3f7e-4c55-9d0a-1f2e3d4c5b6a/content?token=x",
        b"/api/v1/attachments",
    ],
)
def test_the_bodies_of_views_that_stream_them_are_left_to_them(target):
    """tus keeps what arrived of a PATCH cut short; the signed PUT and upload-through stream to storage."""
    head = b"PATCH " + target + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 600000\r\n"
    assert body_to_gather(head) == 0
    assert body_to_gather(head.replace(target, b"/api/v1/uploads")) == 600_000


def test_a_request_trickled_a_byte_at_a_time_is_whole_only_with_its_body():
    request = HEAD + b"Content-Length: 5\r\n\r\nhello"
    intake = Intake(conn=None, head_limit=100_000, now=0.0)
    ready = [intake.feed(request[i : i + 1], now=i * 0.01) for i in range(len(request))]
    assert ready == [False] * (len(request) - 1) + [True]
    assert bytes(intake.buf) == request


def test_headers_have_a_total_deadline_however_steadily_they_arrive(settings):
    settings.AIRLOCK_HTTP_LIMITS = settings.AIRLOCK_HTTP_LIMITS.replace(header_timeout_seconds=10)
    intake = Intake(conn=None, head_limit=100_000, now=0.0)
    intake.feed(b"GET / HTTP/1.1\r\n", now=0.0)
    for second in range(1, 11):
        assert not intake.feed(b"X", now=float(second))
        assert intake.expired(float(second)) is None
    assert intake.expired(10.5) == "headers"


def test_a_body_has_its_allowance_in_all_and_no_long_pause(settings):
    settings.AIRLOCK_HTTP_LIMITS = settings.AIRLOCK_HTTP_LIMITS.replace(
        body_deadline_seconds=30, body_min_bytes_per_second=4096, body_timeout_seconds=30
    )
    assert body_allowance(25 << 20) == pytest.approx(30 + 6400)
    intake = Intake(conn=None, head_limit=100_000, now=0.0)
    assert not intake.feed(HEAD + b"Content-Length: 4096\r\n\r\n", now=0.0)
    allowance = body_allowance(4096)  # 31 s
    for second in range(1, 31):  # a byte a second: never a pause, but never enough either
        intake.feed(b"a", now=float(second))
        assert intake.expired(float(second)) is None
    assert intake.expired(allowance + 0.1) == "body"
    paused = Intake(conn=None, head_limit=100_000, now=0.0)
    paused.feed(HEAD + b"Content-Length: 4096\r\n\r\n", now=0.0)
    assert paused.expired(30.5) == "body"  # nothing for AIRLOCK_HTTP_BODY_TIMEOUT_SECONDS


def test_what_the_parser_refuses_anyway_goes_to_it_at_once():
    assert Intake(conn=None, head_limit=100, now=0.0).feed(b"GET / HTTP/1.1\r\nX: " + b"a" * 200, now=0.0)
    assert Intake(conn=None, head_limit=100_000, now=0.0).feed(b"NOT A REQUEST\r\n", now=0.0)
    assert not Intake(conn=None, head_limit=100_000, now=0.0).feed(b"GET /a?b=c HTTP/1.1\r\n", now=0.0)


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (g.InvalidRequestLine("x"), 400, "VALIDATION_ERROR"),
        (g.InvalidHeaderName("x"), 400, "VALIDATION_ERROR"),
        (g.LimitRequestLine(5000, 4094), 414, "ERROR"),
        (g.LimitRequestHeaders("too many"), 431, "ERROR"),
        (g.UnsupportedTransferCoding("foo"), 501, "ERROR"),
        (g.InvalidResponseHeader("x"), 500, "INTERNAL"),
        (RuntimeError("bug"), 500, "INTERNAL"),
    ],
)
def test_gunicorns_refusals_keep_their_status_in_the_json_error_shape(exc, status, code):
    answer = httperrors.refusal_for(exc)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status} ".encode()) and b"Connection: close" in head
    assert f"Content-Length: {len(body)}".encode() in head and b"Content-Type: application/json" in head
    error = json.loads(body)["error"]
    assert error["code"] == code and error["message"]
    assert ("bug" not in json.dumps(error)) if status == 500 else error["details"]["reason"]


class _GunicornLikeBody:
    """Reads until it has `size` bytes, as gunicorn's Body does: a trickle keeps one read going."""

    def __init__(self, sock) -> None:
        self.sock = sock

    def read(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                break
            data += chunk
        return data


def test_a_streamed_body_read_in_progress_is_cut_off_at_its_deadline(settings):
    import socket
    import threading
    import time

    from ops.bodydeadline import DEADLINES, BodyTooSlow, DeadlineInput

    settings.AIRLOCK_HTTP_LIMITS = settings.AIRLOCK_HTTP_LIMITS.replace(
        body_deadline_seconds=0.5, body_min_bytes_per_second=10**9
    )
    server, client = socket.socketpair()
    stop = threading.Event()

    def trickle() -> None:
        while not stop.wait(0.05):
            try:
                client.send(b"a")
            except OSError:
                return

    sender = threading.Thread(target=trickle)
    sender.start()
    body = DeadlineInput(_GunicornLikeBody(server), server, 1000, time.monotonic())
    DEADLINES.add(body)
    outcome: list[BaseException] = []
    reader = threading.Thread(target=lambda: outcome.append(pytest.raises(BodyTooSlow, body.read, 1000).value))
    try:
        reader.start()
        deadline = time.monotonic() + 5
        while reader.is_alive() and time.monotonic() < deadline:  # the worker's main loop, in short
            DEADLINES.expire_overdue(time.monotonic())
            reader.join(0.1)
        assert not reader.is_alive() and outcome, "the read went on past the body's deadline"
        with pytest.raises(BodyTooSlow):
            body.read(10)  # and stays refused
    finally:
        stop.set()
        DEADLINES.discard(body)
        sender.join(5)
        reader.join(5)
        server.close()
        client.close()
