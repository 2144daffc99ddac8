"""A clamd that is up but fails every scan: for tests of files that keep failing while their scanner answers."""

from __future__ import annotations

import socketserver
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class ErroringClamd:
    """A clamd that answers PING and VERSION but errors on every scan: up, yet failing this file."""

    def __init__(self, path: Path) -> None:
        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                conn = self.request
                conn.settimeout(10)
                command = b""
                while not command.endswith(b"\0"):
                    part = conn.recv(1)
                    if not part:
                        return
                    command += part
                if command == b"zPING\0":
                    conn.sendall(b"PONG\0")
                elif command == b"zVERSION\0":
                    conn.sendall(b"ClamAV 1.4.6/27480/Thu Dec  3 08:35:45 2026\0")
                else:
                    conn.sendall(b"stream: Can't allocate memory ERROR\0")

        self.server = socketserver.ThreadingUnixStreamServer(str(path), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def erroring_clamd(settings) -> Iterator[ErroringClamd]:
    """Point the scanner settings (pytest-django's `settings`) at an ErroringClamd while the block runs."""
    with tempfile.TemporaryDirectory(prefix="alk-e-", dir="/tmp") as tmp:
        fake = ErroringClamd(Path(tmp) / "clamd.sock")
        settings.CLAMD_SOCKET, settings.CLAMD_HOST = str(Path(tmp) / "clamd.sock"), None
        try:
            yield fake
        finally:
            fake.close()
