"""A real HTTP server on loopback that records every webhook it receives (a thread, or a process for benches).

Each request is answered by `respond(request) -> (status, body, delay_seconds)`;
the default answers 204 at once. Requests are recorded after the answer is
decided, delays included, so a test can hold a delivery in flight.
"""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.monotonic)

    @property
    def webhook_id(self) -> str:
        return self.headers["webhook-id"]


def _ok(request: Received) -> tuple[int, bytes, float]:
    return 204, b"", 0.0


class Receiver:
    def __init__(self, respond: Callable[[Received], tuple[int, bytes, float]] | None = None) -> None:
        self.respond = respond or _ok
        self.received: list[Received] = []
        self.arrived = threading.Condition()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a real receiver

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                request = Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                status, answer, delay = receiver.respond(request)
                with receiver.arrived:
                    receiver.received.append(request)
                    receiver.arrived.notify_all()
                if delay:
                    time.sleep(delay)
                self.send_response(status)
                if status in (301, 302, 307, 308):
                    self.send_header("Location", "/redirected")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            do_GET = do_POST  # noqa: N815  (a followed redirect would show up as a GET)

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks"

    def start(self) -> Receiver:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def wait_for(self, predicate: Callable[[list[Received]], bool], timeout: float = 30.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        with self.arrived:
            while not predicate(self.received):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"timed out after {timeout}s; received {len(self.received)}: "
                        f"{[r.body[:120] for r in self.received]}"
                    )
                self.arrived.wait(left)
            return list(self.received)
