"""clamd over its INSTREAM protocol, failing closed.

Only two replies are verdicts: ``stream: OK`` (clean) and ``stream: <name>
FOUND`` (infected, heuristics such as ``Heuristics.Limits.Exceeded.*``
included). Everything else (an ``ERROR`` reply, garbage, silence, a refused
or dropped connection, a timeout) raises ScannerError, so the file stays
unreadable and the job is retried.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterable
from pathlib import Path

from .base import CLEAN, INFECTED, ScannerError, Verdict

NAME = "clamd"
# A real reply is a few dozen bytes; a peer that streams more is not clamd.
MAX_REPLY_BYTES = 4096
_END_OF_STREAM = b"\0\0\0\0"
# VERSION is asked before each scan; a reply this young is reused. A stale one
# is always the older version, so it can only cause an extra rescan, never a missed one.
VERSION_CACHE_SECONDS = 10.0
_versions: dict[str, tuple[float, str]] = {}


def parse_reply(reply: str) -> Verdict:
    """Turn one INSTREAM reply (without its NUL) into a verdict, or raise."""
    if reply == "stream: OK":
        return Verdict(NAME, CLEAN, None)
    if reply.startswith("stream: ") and reply.endswith(" FOUND"):
        signature = reply[len("stream: ") : -len(" FOUND")].strip()
        if signature:
            return Verdict(NAME, INFECTED, signature)
    if reply.endswith("ERROR"):
        raise ScannerError(f"clamd error: {reply}")
    raise ScannerError(f"unexpected clamd reply: {reply!r}")


class ClamdScanner:
    name = NAME

    def __init__(
        self,
        *,
        socket_path: str | None = None,
        host: str | None = None,
        port: int = 3310,
        timeout: float = 30.0,
        chunk_size: int = 64 * 1024,
        max_stream_bytes: int | None = None,
    ) -> None:
        if not socket_path and not host:
            raise ValueError("ClamdScanner needs socket_path or host")
        if chunk_size <= 0 or timeout <= 0:
            raise ValueError("chunk_size and timeout must be positive")
        self.socket_path = socket_path or None
        self.host = None if self.socket_path else host
        self.port = int(port)
        self.timeout = float(timeout)
        self.chunk_size = int(chunk_size)
        # Client-side cap, for when it is known to be below clamd's own
        # StreamMaxLength: refusing early saves uploading bytes for nothing.
        self.max_stream_bytes = max_stream_bytes

    @property
    def address(self) -> str:
        return f"unix:{self.socket_path}" if self.socket_path else f"tcp:{self.host}:{self.port}"

    def __repr__(self) -> str:
        return f"ClamdScanner({self.address}, timeout={self.timeout})"

    def _connect(self) -> socket.socket:
        try:
            if self.socket_path:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    sock.settimeout(self.timeout)
                    sock.connect(self.socket_path)
                except BaseException:
                    sock.close()
                    raise
            else:
                assert self.host is not None
                sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        except OSError as exc:
            raise ScannerError(f"clamd unreachable at {self.address}: {exc}") from exc
        # Every later send/recv is bounded too (sendall: for the whole call).
        sock.settimeout(self.timeout)
        return sock

    def _read_reply(self, sock: socket.socket) -> str:
        """Read up to the NUL terminator, within one overall deadline.

        The deadline is for the whole reply, not per recv(), so a peer that
        drips one byte at a time cannot hold us forever.
        """
        deadline = time.monotonic() + self.timeout
        data = b""
        while b"\0" not in data:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ScannerError(f"clamd at {self.address} did not reply within {self.timeout}s")
            sock.settimeout(remaining)
            try:
                part = sock.recv(1024)
            except TimeoutError as exc:
                raise ScannerError(f"clamd at {self.address} did not reply within {self.timeout}s") from exc
            except OSError as exc:
                raise ScannerError(f"reading clamd reply failed: {exc}") from exc
            if not part:
                # A reply without its terminator may be truncated: not a verdict.
                raise ScannerError(f"clamd closed the connection before replying (got {data!r})")
            data += part
            if len(data) > MAX_REPLY_BYTES:
                raise ScannerError("clamd reply too long")
        return data.split(b"\0", 1)[0].decode("utf-8", "replace").strip()

    def _ask(self, command: str) -> str:
        """Send one command (PING, VERSION) on a fresh connection; clamd's reply."""
        with self._connect() as sock:
            try:
                sock.sendall(f"z{command}\0".encode())
            except OSError as exc:
                raise ScannerError(f"clamd {command} failed: {exc}") from exc
            return self._read_reply(sock)

    def ping(self) -> float:
        started = time.monotonic()
        reply = self._ask("PING")
        if reply != "PONG":
            raise ScannerError(f"unexpected clamd PING reply: {reply!r}")
        return time.monotonic() - started

    def version(self) -> str:
        """clamd's VERSION reply ("ClamAV 1.4.2/27123/…"): engine, signature database and its date.

        It changes when freshclam loads new signatures, which is what makes files
        scanned before worth scanning again.
        """
        cached = _versions.get(self.address)
        if cached is not None and time.monotonic() - cached[0] < VERSION_CACHE_SECONDS:
            return cached[1]
        reply = self._ask("VERSION")
        if not reply.startswith("ClamAV "):
            raise ScannerError(f"unexpected clamd VERSION reply: {reply!r}")
        _versions[self.address] = (time.monotonic(), reply)
        return reply

    def scan(self, chunks: Iterable[bytes], *, path: Path | None = None) -> Verdict:
        # `path` is not needed: the chunks are streamed to clamd as they are read.
        with self._connect() as sock:
            send_error = self._send_stream(sock, chunks)
            try:
                verdict = parse_reply(self._read_reply(sock))
            except ScannerError as exc:
                if send_error is not None:
                    raise ScannerError(f"{exc} (after send failed: {send_error})") from send_error
                raise
        if send_error is not None and verdict.outcome == CLEAN:
            # clamd did not receive every byte, so "OK" covers only a prefix.
            raise ScannerError(f"clamd said OK but the upload failed: {send_error}")
        return verdict

    def _send(self, sock: socket.socket, data: bytes | memoryview) -> OSError | None:
        """sendall(); a timeout is final (clamd is stuck), a hang-up is returned."""
        try:
            sock.sendall(data)
        except TimeoutError as exc:
            raise ScannerError(f"sending to clamd timed out after {self.timeout}s") from exc
        except OSError as exc:  # BrokenPipeError, ConnectionResetError, ...
            return exc
        return None

    def _send_stream(self, sock: socket.socket, chunks: Iterable[bytes]) -> OSError | None:
        """Send the INSTREAM request; return the error if clamd hung up mid-send.

        clamd answers "INSTREAM size limit exceeded. ERROR" and closes while we
        are still sending, so a broken pipe is not the end: the caller still
        reads the reply to learn why. Exceptions raised by the chunk iterator
        itself (storage errors) propagate unchanged.
        """
        if error := self._send(sock, b"zINSTREAM\0"):
            return error
        total = 0
        for chunk in chunks:
            view = memoryview(chunk).cast("B")
            total += len(view)
            if self.max_stream_bytes is not None and total > self.max_stream_bytes:
                raise ScannerError(f"stream exceeds max_stream_bytes={self.max_stream_bytes}; not scanned")
            # Empty chunks send nothing: a zero-length frame is clamd's
            # end-of-stream marker, and sending one early would get only the
            # prefix scanned and a false "OK".
            for start in range(0, len(view), self.chunk_size):
                frame = view[start : start + self.chunk_size]
                header = struct.pack(">I", len(frame))
                if error := self._send(sock, header) or self._send(sock, frame):
                    return error
        return self._send(sock, _END_OF_STREAM)
