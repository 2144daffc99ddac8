"""The Python client (clients/python) against a real `manage.py serve`: one server per test module.

The servers run in whatever mode the environment selects (scripts/test:
PostgreSQL + Redis + clamd; --embedded: SQLite, in-process broker, YARA), as
tests/e2e does; the S3 module points its server at moto over HTTP.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from airlock_client import Client
from tests.s3.conftest import moto_endpoint  # noqa: F401  (the S3 stand-in, over HTTP)
from tests.support import pdf_document
from tests.support.env import EnvExtra
from tests.support.processes import Server
from tests.webhooks.receiver import Receiver

WEBHOOK_SECRET = "whsec_" + base64.b64encode(b"client-tests-webhook-secret-32by").decode()
MIB = 1 << 20


def big_pdf(size: int, seed: int = 1) -> bytes:
    """A valid one-page PDF of about `size` bytes (a random stream pads it); its download is these bytes."""
    noise = random.Random(seed).randbytes(max(0, size - 600))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
        b"<< /Length 40 >>\nstream\nBT /F1 18 Tf 50 700 Td (client) Tj ET   \nendstream",
        b"<< /Length %d >>\nstream\n" % len(noise) + noise + b"\nendstream",
    ]
    return pdf_document(objects)


@dataclass
class Recorder(httpx.BaseTransport):
    """An httpx transport that forwards to the real one and keeps (method, url, headers, status) of each request.

    `break_patch`: the number of the tus PATCH to break: half its body reaches
    the server, then the client sees the connection drop (as a cut mid-body).
    """

    inner: httpx.BaseTransport = field(default_factory=httpx.HTTPTransport)
    seen: list[tuple[str, str, dict[str, str], int]] = field(default_factory=list)
    break_patch: int | None = None
    patches: int = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "PATCH":
            self.patches += 1
            if self.patches == self.break_patch:
                return self._half_then_drop(request)
        response = self.inner.handle_request(request)
        self.seen.append((request.method, str(request.url), dict(request.headers), response.status_code))
        return response

    def _half_then_drop(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        half = body[: len(body) // 2]
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("content-length", "upload-checksum")}
        sent = httpx.Request("PATCH", request.url, headers=headers, content=half)
        self.inner.handle_request(sent).read()
        self.seen.append(("PATCH", str(request.url), dict(request.headers), -1))
        raise httpx.ReadError("connection dropped mid-body (test)", request=request)

    def methods(self) -> list[str]:
        return [method for method, *_ in self.seen]


class FailingFile:
    """A binary file that fails to read past `fail_at` bytes (a disk or a process going away)."""

    def __init__(self, path: Path, fail_at: int) -> None:
        self._file = path.open("rb")
        self.fail_at = fail_at
        self.name = str(path)

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._file.tell()

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._file.seek(offset, whence)

    def read(self, size: int = -1) -> bytes:
        position = self._file.tell()
        if size < 0:
            size = 1 << 40
        if position + size > self.fail_at:
            raise OSError("simulated read failure")
        return self._file.read(size)

    def close(self) -> None:
        self._file.close()


@dataclass
class Live:
    server: Server
    tokens: dict[str, str]
    receiver: Receiver | None = None

    def client(self, user: str = "alice", **kwargs) -> Client:
        return Client(self.server.base, self.tokens[user], **kwargs)


@pytest.fixture(scope="module")
def serve_factory(tmp_path_factory) -> Iterator[Callable[..., Live]]:
    started: list[Live] = []

    def start(
        env: EnvExtra, users: tuple[tuple[str, str], ...] = (("alice", "acme"),), receiver: Receiver | None = None
    ) -> Live:
        server = Server(tmp_path_factory.mktemp("serve"), env)
        live = Live(server, {}, receiver)
        started.append(live)
        for name, tenant in users:
            live.tokens[name] = server.createuser(name, tenant)
        return live

    yield start
    for live in started:
        live.server.stop()
        if live.receiver is not None:
            live.receiver.stop()
