"""A stand-in for Cloudflare Queues' HTTP pull-consumer API, in a thread on loopback.

It follows Cloudflare's documented bodies (developers.cloudflare.com/queues/configuration/pull-consumers/):

- ``POST /client/v4/accounts/{account}/queues/{queue}/messages/pull`` with
  ``{"batch_size", "visibility_timeout_ms"}`` → ``{"success": true, "result": {"messages":
  [{"body", "id", "timestamp_ms", "attempts", "lease_id"}], "message_backlog_count": N}}``;
  each pulled message is leased: nobody else gets it until the lease expires or it is
  retried, and each pull counts an attempt;
- ``POST …/messages/ack`` with ``{"acks": [{"lease_id"}], "retries": [{"lease_id",
  "delay_seconds"}]}`` → ``{"result": {"ackCount", "retryCount", "warnings"}}``; an acked
  message is gone, a retried one comes back after its delay, or goes to the dead-letter
  list once it has had ``max_retries`` + 1 attempts; a stale lease id is a warning.

Time is the fake's own clock (``advance``), never slept, so lease expiry is a step in a test.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.processes import free_port

TOKEN = "cloudflare-test-token"
_PATH = re.compile(r"^/client/v4/accounts/(?P<account>[^/]+)/queues/(?P<queue>[^/]+)/messages/(?P<verb>pull|ack)$")


@dataclass
class _Message:
    id: str
    body: str
    timestamp_ms: int
    attempts: int = 0
    lease_id: str | None = None
    leased_until: float = 0.0
    available_at: float = 0.0


@dataclass
class FakeQueue:
    max_retries: int = 3
    messages: list[_Message] = field(default_factory=list)
    dead_letters: list[_Message] = field(default_factory=list)
    pulls: int = 0
    ack_calls: list[dict] = field(default_factory=list)


class FakeQueues:
    """The queues of one account; `url` is the base URL to give the SDK."""

    def __init__(self, account: str = "acc0123", *, max_retries: int = 3) -> None:
        self.account = account
        self.max_retries = max_retries
        self.queues: dict[str, FakeQueue] = {}
        self.now = 0.0  # seconds on the fake's clock
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="fake-cloudflare-queues", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/client/v4"

    def start(self) -> FakeQueues:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # --- what a test does -------------------------------------------------------

    def queue(self, queue_id: str) -> FakeQueue:
        with self.lock:
            return self.queues.setdefault(queue_id, FakeQueue(max_retries=self.max_retries))

    def send(self, queue_id: str, body: Any) -> str:
        """Publish one message (R2 publishes JSON: the body is its JSON text)."""
        queue = self.queue(queue_id)
        with self.lock:
            message = _Message(
                id=uuid.uuid4().hex,
                body=body if isinstance(body, str) else json.dumps(body),
                timestamp_ms=int(1_765_000_000_000 + self.now * 1000),
                available_at=self.now,
            )
            queue.messages.append(message)
            return message.id

    def advance(self, seconds: float) -> None:
        """Move the clock: leases and retry delays run out."""
        with self.lock:
            self.now += seconds

    def depth(self, queue_id: str) -> int:
        with self.lock:
            return len(self.queue_unlocked(queue_id).messages)

    def queue_unlocked(self, queue_id: str) -> FakeQueue:
        return self.queues.setdefault(queue_id, FakeQueue(max_retries=self.max_retries))

    # --- the API ----------------------------------------------------------------

    def _pull(self, queue: FakeQueue, body: dict) -> dict:
        batch_size = int(body.get("batch_size") or 10)
        visibility = float(body.get("visibility_timeout_ms") or 30_000) / 1000
        queue.pulls += 1
        self._expire(queue)
        out = []
        for message in queue.messages:
            if len(out) >= batch_size:
                break
            if message.available_at > self.now or (message.lease_id and message.leased_until > self.now):
                continue
            message.attempts += 1
            message.lease_id = uuid.uuid4().hex
            message.leased_until = self.now + visibility
            out.append(
                {
                    "body": message.body,
                    "id": message.id,
                    "timestamp_ms": message.timestamp_ms,
                    "attempts": message.attempts,
                    "lease_id": message.lease_id,
                    "metadata": {"CF-sourceMessageSource": "r2", "CF-Content-Type": "json"},
                }
            )
        return {"messages": out, "message_backlog_count": len(queue.messages)}

    def _expire(self, queue: FakeQueue) -> None:
        """A lease that ran out counts as a failed attempt: past max_retries it is dead-lettered."""
        for message in list(queue.messages):
            if message.lease_id and message.leased_until <= self.now:
                message.lease_id = None
                if message.attempts > queue.max_retries:
                    queue.messages.remove(message)
                    queue.dead_letters.append(message)

    def _ack(self, queue: FakeQueue, body: dict) -> dict:
        queue.ack_calls.append(body)
        by_lease = {m.lease_id: m for m in queue.messages if m.lease_id and m.leased_until > self.now}
        warnings: dict[str, str] = {}
        acked = retried = 0
        for ack in body.get("acks") or []:
            message = by_lease.pop(ack.get("lease_id"), None)
            if message is None:
                warnings[str(ack.get("lease_id"))] = "lease not found or expired"
                continue
            queue.messages.remove(message)
            acked += 1
        for retry in body.get("retries") or []:
            message = by_lease.pop(retry.get("lease_id"), None)
            if message is None:
                warnings[str(retry.get("lease_id"))] = "lease not found or expired"
                continue
            message.lease_id = None
            message.available_at = self.now + float(retry.get("delay_seconds") or 0)
            retried += 1
            if message.attempts > queue.max_retries:
                queue.messages.remove(message)
                queue.dead_letters.append(message)
        return {"ackCount": acked, "retryCount": retried, "warnings": warnings}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    error = {"code": 10000, "message": "Authentication error"}
                    self._send(403, {"success": False, "errors": [error], "messages": [], "result": None})
                    return
                match = _PATH.match(self.path)
                if not match or match["account"] != fake.account:
                    self._send(404, {"success": False, "errors": [{"code": 7003, "message": "No route"}]})
                    return
                body = json.loads(raw or b"{}")
                with fake.lock:
                    queue = fake.queue_unlocked(match["queue"])
                    result = fake._pull(queue, body) if match["verb"] == "pull" else fake._ack(queue, body)
                self._send(200, {"success": True, "errors": [], "messages": [], "result": result})

        return Handler
