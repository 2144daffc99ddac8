"""ClamdScanner against fake servers and dead addresses: every failure is a
ScannerError, never a clean verdict. No real clamd needed."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from processing.scanners import ClamdScanner, ScannerError
from processing.scanners.clamd import parse_reply
from tests.support.processes import free_port

from .support import EICAR, FakeClamd

FakeFactory = Callable[[Callable[[FakeClamd, socket.socket], None]], FakeClamd]


# --- reply parsing -----------------------------------------------------------


@pytest.mark.parametrize(
    "reply,signature",
    [
        ("stream: Eicar-Test-Signature FOUND", "Eicar-Test-Signature"),
        (
            "stream: Heuristics.Limits.Exceeded.MaxFileSize FOUND",
            "Heuristics.Limits.Exceeded.MaxFileSize",
        ),
        ("stream: Heuristics.Zip.OverlappingFiles FOUND", "Heuristics.Zip.OverlappingFiles"),
    ],
)
def test_found_is_infected(reply: str, signature: str) -> None:
    verdict = parse_reply(reply)
    assert verdict.outcome == "infected" and verdict.signature == signature


def test_ok_is_clean() -> None:
    verdict = parse_reply("stream: OK")
    assert verdict.outcome == "clean" and verdict.signature is None and verdict.scanner == "clamd"


@pytest.mark.parametrize(
    "reply",
    [
        "INSTREAM size limit exceeded. ERROR",
        "stream: Can't allocate memory ERROR",
        "",
        "PONG",
        "stream: OK but not really",
        "stream:  FOUND",
        "OK",
        "UNKNOWN COMMAND",
    ],
)
def test_anything_else_is_an_error(reply: str) -> None:
    with pytest.raises(ScannerError):
        parse_reply(reply)


# --- dead addresses ------------------------------------------------------------


def test_missing_socket_is_an_error(short_sock_dir: Path) -> None:
    scanner = ClamdScanner(socket_path=str(short_sock_dir / "nothing.sock"), timeout=2)
    with pytest.raises(ScannerError, match="unreachable"):
        scanner.scan([b"hello"])
    with pytest.raises(ScannerError, match="unreachable"):
        scanner.ping()


def test_closed_port_is_an_error() -> None:
    scanner = ClamdScanner(host="127.0.0.1", port=free_port(), timeout=2)
    with pytest.raises(ScannerError, match="unreachable"):
        scanner.scan([b"hello"])
    with pytest.raises(ScannerError, match="unreachable"):
        scanner.ping()


def test_needs_an_address() -> None:
    with pytest.raises(ValueError):
        ClamdScanner()


# --- fake servers --------------------------------------------------------------


def _scanner(fake: FakeClamd, timeout: float = 1.0, **kw: object) -> ClamdScanner:
    return ClamdScanner(socket_path=str(fake.path), timeout=timeout, **kw)  # type: ignore[arg-type]


def test_framing_against_an_honest_fake(fake_clamd: FakeFactory) -> None:
    def honest(fake: FakeClamd, conn: socket.socket) -> None:
        assert fake.read_instream(conn)
        conn.sendall(b"stream: OK\0")

    fake = fake_clamd(honest)
    data = [b"", b"a" * 10, b"", b"b" * 25, b""]
    verdict = _scanner(fake, chunk_size=8).scan(iter(data))
    assert verdict.outcome == "clean"
    # Empty chunks never become (terminating) zero-length frames; big ones are split.
    assert fake.frames == [8, 2, 8, 8, 8, 1]
    assert bytes(fake.payload) == b"a" * 10 + b"b" * 25


def test_found_from_a_fake(fake_clamd: FakeFactory) -> None:
    def found(fake: FakeClamd, conn: socket.socket) -> None:
        fake.read_instream(conn)
        conn.sendall(b"stream: Heuristics.Limits.Exceeded.MaxScanSize FOUND\0")

    verdict = _scanner(fake_clamd(found)).scan([EICAR])
    assert verdict.outcome == "infected"
    assert verdict.signature == "Heuristics.Limits.Exceeded.MaxScanSize"


@pytest.mark.parametrize(
    "reply",
    [b"hello there\0", b"\0", b"stream: OK", b"stream: O", b"\xff\xfe\0", b"x" * 10_000],
    ids=["garbage", "empty", "no-terminator", "truncated", "binary", "flood"],
)
def test_garbage_replies_are_errors(fake_clamd: FakeFactory, reply: bytes) -> None:
    def garbage(fake: FakeClamd, conn: socket.socket) -> None:
        fake.read_instream(conn)
        conn.sendall(reply)
        conn.close()

    with pytest.raises(ScannerError):
        _scanner(fake_clamd(garbage)).scan([b"hello"])


def test_server_closing_early_is_an_error(fake_clamd: FakeFactory) -> None:
    def close_early(fake: FakeClamd, conn: socket.socket) -> None:
        conn.close()

    with pytest.raises(ScannerError):
        _scanner(fake_clamd(close_early)).scan([b"x" * 4 * 1024 * 1024])


def _assert_times_out(scanner: ClamdScanner, op: Callable[[], object]) -> None:
    started = time.monotonic()
    with pytest.raises(ScannerError, match="did not reply|timed out"):
        op()
    elapsed = time.monotonic() - started
    assert elapsed < scanner.timeout + 1.5, elapsed


def test_server_that_never_replies_times_out(fake_clamd: FakeFactory) -> None:
    def silent(fake: FakeClamd, conn: socket.socket) -> None:
        fake.read_instream(conn)
        fake.stop.wait(10)

    scanner = _scanner(fake_clamd(silent), timeout=0.5)
    _assert_times_out(scanner, lambda: scanner.scan([b"hello"]))


def test_server_that_never_reads_times_out(fake_clamd: FakeFactory) -> None:
    def deaf(fake: FakeClamd, conn: socket.socket) -> None:
        fake.stop.wait(10)

    scanner = _scanner(fake_clamd(deaf), timeout=0.5)
    # Far more than the socket buffers hold, so sendall() blocks.
    _assert_times_out(scanner, lambda: scanner.scan([b"x" * 64 * 1024 * 1024]))


def test_dripping_reply_is_bounded_by_one_deadline(fake_clamd: FakeFactory) -> None:
    def drip(fake: FakeClamd, conn: socket.socket) -> None:
        fake.read_instream(conn)
        while not fake.stop.wait(0.1):
            conn.sendall(b"s")

    scanner = _scanner(fake_clamd(drip), timeout=0.5)
    _assert_times_out(scanner, lambda: scanner.scan([b"hello"]))


def test_ping_that_never_answers_times_out(fake_clamd: FakeFactory) -> None:
    def silent(fake: FakeClamd, conn: socket.socket) -> None:
        fake.stop.wait(10)

    scanner = _scanner(fake_clamd(silent), timeout=0.5)
    _assert_times_out(scanner, scanner.ping)


def test_ping_garbage_is_an_error(fake_clamd: FakeFactory) -> None:
    def wrong(fake: FakeClamd, conn: socket.socket) -> None:
        assert fake.read_command(conn) == b"zPING\0"
        conn.sendall(b"PANG\0")

    with pytest.raises(ScannerError, match="PING"):
        _scanner(fake_clamd(wrong)).ping()


def test_ping_pong(fake_clamd: FakeFactory) -> None:
    def pong(fake: FakeClamd, conn: socket.socket) -> None:
        assert fake.read_command(conn) == b"zPING\0"
        conn.sendall(b"PONG\0")

    assert 0 <= _scanner(fake_clamd(pong)).ping() < 1


def _hang_up_after_first_frame(reply: bytes) -> Callable[[FakeClamd, socket.socket], None]:
    """Like clamd past StreamMaxLength: answer while the client is still sending, then close."""

    def handler(fake: FakeClamd, conn: socket.socket) -> None:
        fake.read_instream(conn, max_frames=1)
        conn.sendall(reply)
        conn.close()

    return handler


def test_size_limit_error_mid_send_is_an_error(fake_clamd: FakeFactory) -> None:
    fake = fake_clamd(_hang_up_after_first_frame(b"INSTREAM size limit exceeded. ERROR\0"))
    with pytest.raises(ScannerError, match="size limit"):
        _scanner(fake).scan([b"x" * 32 * 1024 * 1024])


def test_ok_after_a_broken_pipe_is_not_clean(fake_clamd: FakeFactory) -> None:
    # "OK" covers only what clamd received; the rest of the object was never scanned.
    fake = fake_clamd(_hang_up_after_first_frame(b"stream: OK\0"))
    with pytest.raises(ScannerError, match="upload failed"):
        _scanner(fake).scan([b"x" * 32 * 1024 * 1024])


def test_found_after_a_broken_pipe_is_infected(fake_clamd: FakeFactory) -> None:
    fake = fake_clamd(_hang_up_after_first_frame(b"stream: Eicar-Test-Signature FOUND\0"))
    assert _scanner(fake).scan([b"x" * 32 * 1024 * 1024]).outcome == "infected"


def test_client_side_max_stream_bytes(fake_clamd: FakeFactory) -> None:
    def honest(fake: FakeClamd, conn: socket.socket) -> None:
        try:
            fake.read_instream(conn)
            conn.sendall(b"stream: OK\0")
        except ConnectionError:
            pass

    scanner = _scanner(fake_clamd(honest), max_stream_bytes=100)
    assert scanner.scan([b"a" * 100]).outcome == "clean"
    with pytest.raises(ScannerError, match="max_stream_bytes"):
        scanner.scan([b"a" * 60, b"a" * 41])


def test_storage_errors_from_the_iterator_propagate(fake_clamd: FakeFactory) -> None:
    def honest(fake: FakeClamd, conn: socket.socket) -> None:
        try:
            fake.read_instream(conn)
            conn.sendall(b"stream: OK\0")
        except ConnectionError:
            pass

    def broken_storage():
        yield b"abc"
        raise OSError("storage read failed")

    with pytest.raises(OSError, match="storage read failed"):
        _scanner(fake_clamd(honest)).scan(broken_storage())


# --- VERSION: what a verdict was judged with (processing/rescan/jobs.py) ------------


def _version_reply(reply: bytes):
    def handler(fake: FakeClamd, conn: socket.socket) -> None:
        request = b""
        while not request.endswith(b"\0"):
            request += conn.recv(64)
        assert request == b"zVERSION\0"
        conn.sendall(reply)

    return handler


def test_version_is_clamds_reply_and_is_reused_for_a_few_seconds(fake_clamd: FakeFactory, monkeypatch) -> None:
    from processing.scanners import clamd as clamd_module

    monkeypatch.setattr(clamd_module, "_versions", {})
    fake = fake_clamd(_version_reply(b"ClamAV 1.4.2/27480/Thu Dec  3 08:35:45 2026\0"))
    scanner = _scanner(fake)
    assert scanner.version() == "ClamAV 1.4.2/27480/Thu Dec  3 08:35:45 2026"
    fake.close()  # a second ask within VERSION_CACHE_SECONDS does not connect
    assert scanner.version() == "ClamAV 1.4.2/27480/Thu Dec  3 08:35:45 2026"


@pytest.mark.parametrize("reply", [b"PONG\0", b"\0", b"ERROR\0"])
def test_a_version_reply_that_is_not_clamds_is_an_error(fake_clamd: FakeFactory, monkeypatch, reply) -> None:
    from processing.scanners import clamd as clamd_module

    monkeypatch.setattr(clamd_module, "_versions", {})
    with pytest.raises(ScannerError, match="VERSION"):
        _scanner(fake_clamd(_version_reply(reply))).version()


def test_no_version_from_a_clamd_that_is_down(short_sock_dir: Path, monkeypatch) -> None:
    from processing.scanners import clamd as clamd_module

    monkeypatch.setattr(clamd_module, "_versions", {})
    with pytest.raises(ScannerError, match="unreachable"):
        ClamdScanner(socket_path=str(short_sock_dir / "none.sock"), timeout=1).version()
