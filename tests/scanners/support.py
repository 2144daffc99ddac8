"""Helpers shared by the scanner tests (no Django, no database)."""

from __future__ import annotations

import os
import socket
import socketserver
import threading
from collections.abc import Callable
from pathlib import Path

from processing.scanners import ClamdScanner
from tests.corpus import corpus_dir

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CLAMD_SOCKET = "/tmp/airlock-clamd/clamd.sock"
CLAMD_SH = REPO / "scripts" / "clamd.sh"
TESTFILES = Path("/usr/share/clamav-testfiles")
CORPUS = corpus_dir()

# The EICAR string, assembled at runtime from two halves so that this source
# file itself is not flagged by antivirus software (or by our own rules).
EICAR = b"X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR" + b"-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"
assert len(EICAR) == 68


def clamd_from_env(timeout: float = 30.0) -> ClamdScanner:
    """CLAMD_SOCKET, else CLAMD_HOST/CLAMD_PORT, else scripts/clamd.sh's socket."""
    if os.environ.get("CLAMD_SOCKET"):
        return ClamdScanner(socket_path=os.environ["CLAMD_SOCKET"], timeout=timeout)
    if os.environ.get("CLAMD_HOST"):
        return ClamdScanner(
            host=os.environ["CLAMD_HOST"],
            port=int(os.environ.get("CLAMD_PORT", "3310")),
            timeout=timeout,
        )
    return ClamdScanner(socket_path=DEFAULT_CLAMD_SOCKET, timeout=timeout)


class FakeClamd:
    """A unix-socket server that speaks just enough clamd to misbehave on cue.

    ``handler(conn)`` gets the raw connected socket; ``frames`` records the
    INSTREAM frame lengths read by ``read_instream`` so framing can be checked.
    """

    def __init__(self, path: Path, handler: Callable[[FakeClamd, socket.socket], None]) -> None:
        self.path = path
        self.frames: list[int] = []
        self.payload = bytearray()
        self.stop = threading.Event()
        fake = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                handler(fake, self.request)

        self.server = socketserver.ThreadingUnixStreamServer(str(path), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def read_exact(self, conn: socket.socket, n: int) -> bytes:
        data = b""
        while len(data) < n:
            part = conn.recv(n - len(data))
            if not part:
                raise ConnectionError("client closed")
            data += part
        return data

    def read_command(self, conn: socket.socket) -> bytes:
        data = b""
        while not data.endswith(b"\0"):
            part = conn.recv(1)
            if not part:
                raise ConnectionError("client closed")
            data += part
        return data

    def read_instream(self, conn: socket.socket, max_frames: int | None = None) -> bool:
        """Read command + frames; True if the zero-length terminator arrived."""
        assert self.read_command(conn) == b"zINSTREAM\0"
        while max_frames is None or len(self.frames) < max_frames:
            size = int.from_bytes(self.read_exact(conn, 4), "big")
            if size == 0:
                return True
            self.frames.append(size)
            self.payload += self.read_exact(conn, size)
        return False

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()
