"""/readyz is cheap: one set of checks a second per process behind a single flight; names only with the token."""

from __future__ import annotations

import json
import threading
import time

import pytest
from django.test import Client

from ops import health

pytestmark = pytest.mark.django_db(transaction=True)


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def once_a_second(monkeypatch) -> _Clock:
    """Production's reuse window (tests/conftest.py sets 0), on a clock the test moves."""
    clock = _Clock()
    monkeypatch.setattr(health, "REUSE_SECONDS", 1.0)
    monkeypatch.setattr(health, "_now", clock)
    return clock


@pytest.fixture
def computations(monkeypatch) -> list[float]:
    """Each run of the checks, slowed so that concurrent callers overlap it."""
    real, runs = health.readiness, []

    def slow_readiness(**kwargs):
        runs.append(time.monotonic())
        time.sleep(0.2)
        return real(**kwargs)

    monkeypatch.setattr(health, "readiness", slow_readiness)
    return runs


def _together(n: int, call) -> list:
    start, results = threading.Barrier(n), [None] * n

    def run(i: int) -> None:
        start.wait()
        results[i] = call()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return results


def test_thirty_concurrent_probes_run_the_checks_once(once_a_second, computations):
    before = health.CHECK_RUNS._value.get()
    answers = _together(30, lambda: Client().get("/readyz"))
    assert [a.status_code for a in answers] == [200] * 30
    assert len(computations) == 1 and health.CHECK_RUNS._value.get() == before + 1
    assert len({a.content for a in answers}) == 1  # one report, given to everyone


def test_the_checks_run_at_most_once_per_second(once_a_second, computations):
    for _ in range(10):  # 2.5 s of polling at 4 calls a second per thread, 5 threads
        _together(5, health.current_readiness)
        once_a_second.now += 0.25
    assert len(computations) == 3  # at 0, 1.0 and 2.0 s: a new report only once the last is a second old


def test_a_probe_during_a_computation_answers_the_last_report_at_once(once_a_second, computations):
    first = health.current_readiness()
    once_a_second.now += 1.5  # stale: the next call computes
    slow = threading.Thread(target=health.current_readiness)
    slow.start()
    while len(computations) < 2:
        time.sleep(0.01)
    started = time.monotonic()
    assert health.current_readiness() is first  # no second computation, no wait for it
    assert time.monotonic() - started < 0.1
    slow.join(10)
    assert len(computations) == 2


@pytest.mark.parametrize(
    ("token", "open_metrics", "presented", "named"),
    [
        (None, True, None, False),  # the embedded default: open /metrics, yet no names on /readyz
        (None, False, "Bearer anything", False),  # production without a token: never
        ("metrics-secret", False, None, False),
        ("metrics-secret", False, "Bearer wrong", False),
        ("metrics-secret", False, "Bearer metrics-secret", True),
    ],
)
def test_paused_tenants_are_named_only_to_the_metrics_token(
    client, acme_behind, alice, settings, token, open_metrics, presented, named
):
    from tests.support import client_for, create_intent

    assert create_intent(client_for(alice), size=10).status_code == 503  # acme's uploads are paused
    settings.AIRLOCK_METRICS_TOKEN = token
    settings.AIRLOCK_METRICS = settings.AIRLOCK_METRICS.replace(open=open_metrics)
    headers = {"HTTP_AUTHORIZATION": presented} if presented else {}
    response = client.get("/readyz", **headers)
    assert response.status_code == 200
    body = response.json()
    uploads = body["checks"]["uploads"]
    assert uploads["paused_tenant_count"] == 1 and body["degraded"]
    if named:
        assert uploads["paused_tenants"] == ["acme"] and "tenant acme" in uploads["state"]
    else:
        assert "paused_tenants" not in uploads and "acme" not in json.dumps(body)
        assert uploads["state"].startswith("degraded: New uploads are paused for 1 tenant")
