"""Fixtures for the operator endpoints: closed ports, reading /metrics."""

from __future__ import annotations

import socket
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
