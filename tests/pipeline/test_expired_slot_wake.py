"""A slot freed by its holder's expiry (its release was lost) wakes the jobs parked behind it at the next tick.

No release hands such a slot over, so before the tick looked at the waiting
rooms those jobs waited for the lease re-drive (AIRLOCK_LEASE_SECONDS) or for
some other job of the pool to finish.
"""

from __future__ import annotations

import time
import uuid

import pytest

from attachments.models import OutboxMessage
from attachments.shared_redis import backend_redis
from processing import tenant_slots
from processing.recovery import recover

pytestmark = pytest.mark.django_db  # in the test's transaction: the woken jobs stay in the outbox, unsent

LIVE, EXPIRES = 60_000, 50  # ms


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def slots(request, settings, monkeypatch):
    """This test's slots, as the scheduler finds them (Redis under a prefix of its own)."""
    if request.param == "memory":
        backend: tenant_slots.SlotsBackend = tenant_slots.MemorySlots()
    else:
        assert settings.REDIS_URL, "the redis-marked tests run with REDIS_URL (scripts/test)"
        backend = tenant_slots.RedisSlots(backend_redis(), f"{settings.AIRLOCK_KEY_PREFIX}-{uuid.uuid4().hex[:8]}")
    monkeypatch.setattr(tenant_slots.backend, "value", backend)
    return backend


def _hold(slots, key: str, *, ttl_ms: int, stage: str = "tenant") -> None:
    assert slots.acquire_or_park(
        key, uuid.uuid4().hex, "unused", limit=99, ttl_ms=ttl_ms, park_ttl_ms=LIVE, stage=stage
    )


def _park(slots, key: str, args: tuple, *, stage: str = "tenant") -> None:
    assert not slots.acquire_or_park(
        key, uuid.uuid4().hex, tenant_slots.encode(args), limit=1, ttl_ms=LIVE, park_ttl_ms=LIVE, stage=stage
    )


def _sent(actor_name: str, *args: str) -> int:
    return OutboxMessage.objects.filter(actor_name=actor_name, args=list(args)).count()


def test_a_job_parked_behind_an_expired_holder_is_sent_again_by_the_next_tick(slots, settings):
    settings.AIRLOCK_CONCURRENCY = settings.AIRLOCK_CONCURRENCY.replace(tenant=1)
    file_id, token = str(uuid.uuid4()), str(uuid.uuid4())
    _hold(slots, "7", ttl_ms=EXPIRES)  # its job was lost without releasing
    _park(slots, "7", (file_id, token, "7", "derive"))
    time.sleep(0.12)

    report = recover()
    assert _sent("derive", file_id, token, "7") == 1
    assert report.woken_after_expiry == 1
    assert slots.parked_files("7") == set()
    assert recover().woken_after_expiry == 0  # sent once


def test_a_pool_at_its_limit_with_live_holders_wakes_nothing(slots, settings):
    settings.AIRLOCK_CONCURRENCY = settings.AIRLOCK_CONCURRENCY.replace(tenant=2)
    waiting = [(str(uuid.uuid4()), str(uuid.uuid4())) for _ in range(2)]
    _hold(slots, "7", ttl_ms=LIVE)
    _hold(slots, "7", ttl_ms=EXPIRES)
    for file_id, token in waiting:
        _park(slots, "7", (file_id, token, "7", "scan"))

    recover()
    assert [_sent("scan", *job, "7") for job in waiting] == [0, 0]  # two live holders: the pool is full
    time.sleep(0.12)
    report = recover()
    assert [_sent("scan", *job, "7") for job in waiting] == [1, 0]  # one slot freed by expiry: the first parked
    assert report.woken_after_expiry == 1
    assert slots.parked_files("7") == {waiting[1][0]}


def test_a_webhook_endpoints_pool_wakes_on_expiry_under_its_own_limit(slots, settings):
    settings.AIRLOCK_WEBHOOK_DELIVERY = settings.AIRLOCK_WEBHOOK_DELIVERY.replace(endpoint_concurrency=1)
    settings.AIRLOCK_CONCURRENCY = settings.AIRLOCK_CONCURRENCY.replace(tenant=5)  # not the endpoints' limit
    _hold(slots, "41", ttl_ms=LIVE, stage="webhook")
    _park(slots, "41", ("100", "41", "webhook"), stage="webhook")
    _hold(slots, "42", ttl_ms=EXPIRES, stage="webhook")
    _park(slots, "42", ("200", "42", "webhook"), stage="webhook")
    time.sleep(0.12)

    report = recover()
    assert _sent("webhook_deliver", "200", "42") == 1  # its holder expired
    assert _sent("webhook_deliver", "100", "41") == 0  # at its limit: waits for its holder's release
    assert report.woken_after_expiry == 1
    assert slots.parked_files("41", stage="webhook") == {"100"}
