"""The client waits out an outage: connections refused and 503s are retried for its outage budget (60 s by default)."""

from __future__ import annotations

import httpx
import pytest

from airlock_client import Client, ServiceUnavailable, TransportError

USAGE = {"bytes_used": 1, "bytes_limit": None, "files_used": 1, "files_limit": None}


def _refusing(times: int):
    calls = {"n": 0}

    def handle(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] <= times:
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        return httpx.Response(200, json=USAGE)

    return handle, calls


def test_connections_refused_for_longer_than_the_retries_are_waited_out():
    handle, calls = _refusing(6)  # max_retries alone (4: 0.5 + 1 + 2 + 4 s of backoff) would give up
    slept: list[float] = []
    with Client("http://airlock.test", "t", transport=httpx.MockTransport(handle), sleep=slept.append) as client:
        assert client.usage()["bytes_used"] == 1
    assert calls["n"] == 7 and len(slept) == 6 and sum(slept) > 20
    assert all(b >= a for a, b in zip(slept, slept[1:], strict=False)), "backs off"


def test_a_server_away_past_the_budget_is_a_transport_error_after_about_the_budget():
    handle, _ = _refusing(10_000)
    slept: list[float] = []
    with (
        Client(
            "http://airlock.test", "t", transport=httpx.MockTransport(handle), sleep=slept.append, outage_budget=60
        ) as client,
        pytest.raises(TransportError),
    ):
        client.usage()
    assert 60 <= sum(slept) <= 60 + 36, sum(slept)  # one backoff (at most max_backoff + 20 %) past the budget


def test_503s_are_retried_for_the_outage_budget_too():
    answers = iter([httpx.Response(503, headers={"Retry-After": "5"}, json={"error": {"code": "UNAVAILABLE"}})] * 7)
    slept: list[float] = []

    def handle(request: httpx.Request) -> httpx.Response:
        return next(answers, httpx.Response(200, json=USAGE))

    with Client("http://airlock.test", "t", transport=httpx.MockTransport(handle), sleep=slept.append) as client:
        assert client.usage()["bytes_used"] == 1
    assert len(slept) == 7 and all(pause >= 5 for pause in slept)


def test_a_smaller_budget_gives_up_sooner():
    handle, _ = _refusing(10_000)
    slept: list[float] = []
    with (
        Client(
            "http://airlock.test", "t", transport=httpx.MockTransport(handle), sleep=slept.append, outage_budget=0
        ) as client,
        pytest.raises(TransportError),
    ):
        client.usage()
    assert len(slept) == 4  # max_retries


def test_the_budget_is_not_spent_on_answers_that_are_not_outages():
    answers = iter([httpx.Response(503, json={"error": {"code": "UNAVAILABLE"}})] * 100)
    slept: list[float] = []
    with (
        Client(
            "http://airlock.test",
            "t",
            transport=httpx.MockTransport(lambda request: next(answers)),
            sleep=slept.append,
            outage_budget=10,
        ) as client,
        pytest.raises(ServiceUnavailable),
    ):
        client.usage()
    assert 10 <= sum(slept) <= 10 + 36
