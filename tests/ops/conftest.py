"""Fixtures for the operator endpoints: closed ports, a private clamd, reading /metrics."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port that refuses connections (bound, never listening) for the whole test."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PrivateClamd:
    """A clamd of our own (scripts/clamd.sh with its own dir and port) that a test may stop and start."""

    def __init__(self) -> None:
        # Short path: a unix socket path must fit in 108 bytes.
        self.dir = Path(tempfile.mkdtemp(prefix="alk-clamd-"))
        self.port = free_port()
        self.socket = str(self.dir / "clamd.sock")

    def _run(self, action: str) -> subprocess.CompletedProcess:
        env = {
            **os.environ,
            "AIRLOCK_CLAMD_DIR": str(self.dir),
            "AIRLOCK_CLAMD_PORT": str(self.port),
            "AIRLOCK_CLAMD_STREAM_MAX": "10M",
            "AIRLOCK_PYTHON": sys.executable,
        }
        return subprocess.run(  # noqa: PLW1510 - the caller checks returncode
            [str(ROOT / "scripts" / "clamd.sh"), action],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def start(self) -> None:
        result = self._run("start")
        assert result.returncode == 0, f"private clamd did not start: {result.stderr[-2000:]}"

    def stop(self) -> None:
        result = self._run("stop")
        assert result.returncode == 0, result.stderr[-2000:]


@pytest.fixture
def private_clamd() -> Iterator[PrivateClamd]:
    clamd = PrivateClamd()
    clamd.start()
    try:
        yield clamd
    finally:
        clamd.stop()
        shutil.rmtree(clamd.dir, ignore_errors=True)


def metric_value(text: str, name: str, labels: dict[str, str] | None = None) -> float:
    """The value of one sample in Prometheus text (0.0 when the series is absent)."""
    from prometheus_client.parser import text_string_to_metric_families

    wanted = labels or {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in wanted.items()):
                return float(sample.value)
    return 0.0


@pytest.fixture
def scrape(client):
    """GET /metrics and return its text."""

    def get() -> str:
        response = client.get("/metrics")
        assert response.status_code == 200, response.content[:500]
        return response.content.decode()

    return get
