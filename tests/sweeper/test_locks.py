"""The one-sweeper lock: token, expiry, renewal; Redis when configured, the database otherwise."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from attachments.shared_redis import backend_redis
from sweeper.locks import DatabaseLock, LockUnavailable, RedisLock, make_lock
from sweeper.models import SweeperLease
from sweeper.sweep import sweep_expired
from tests.sweeper.support import DAY, T0, CountingGateway, make_attachment


def _unreachable():
    import redis

    return redis.Redis.from_url("redis://127.0.0.1:1/0", socket_timeout=5, socket_connect_timeout=5)


@pytest.mark.django_db
def test_database_lock_is_exclusive_renewable_and_released_by_token():
    first, second = DatabaseLock("sweep"), DatabaseLock("sweep")
    assert first.acquire()
    assert not second.acquire()
    assert first.renew()
    assert not second.renew()
    second.release()  # not the holder: changes nothing
    assert not second.acquire()
    first.release()
    assert second.acquire()
    assert not first.renew()


@pytest.mark.django_db
def test_database_lock_of_a_crashed_holder_expires():
    crashed = DatabaseLock("sweep")
    assert crashed.acquire()
    SweeperLease.objects.filter(name="sweep").update(expires_at=timezone.now() - timedelta(seconds=1))
    successor = DatabaseLock("sweep")
    assert successor.acquire()
    assert not crashed.renew()  # the old holder finds out at its next renewal and stops


@pytest.mark.django_db
def test_a_sweep_that_loses_its_lock_stops(alice):
    for _ in range(4):
        make_attachment(alice, thumbnail=False, served=False)
    lock = DatabaseLock("sweep")

    def steal(key: str) -> None:
        lock.token = "lost"  # as if the lease expired and another instance took it over

    report = sweep_expired(now=T0 + 8 * DAY, lock=lock, gateway=CountingGateway(on_delete=steal), batch_size=2)
    assert report.stopped == "lock_lost" and report.deleted == 2


@pytest.mark.django_db
def test_make_lock_uses_the_database_without_redis(settings):
    settings.REDIS_URL = None
    assert isinstance(make_lock("sweep"), DatabaseLock)


@pytest.mark.redis
def test_make_lock_uses_redis_when_configured():
    assert isinstance(make_lock("sweep"), RedisLock)


@pytest.mark.redis
def test_redis_lock_is_exclusive_renewable_and_released_by_token():
    first = RedisLock("test-exclusive", client=backend_redis(), ttl_seconds=30)
    second = RedisLock("test-exclusive", client=backend_redis(), ttl_seconds=30)
    assert first.acquire()
    try:
        assert not second.acquire()
        assert first.renew()
        assert not second.renew()
        second.release()  # token-checked: does not free the holder's lock
        assert not second.acquire()
    finally:
        first.release()
    assert second.acquire()
    second.release()


@pytest.mark.redis
def test_redis_lock_expires_on_its_own(settings):
    import redis

    crashed = RedisLock("test-expiry", client=backend_redis(), ttl_seconds=30)
    assert crashed.acquire()
    # Shorten the TTL instead of waiting for it: a crashed holder never renews.
    redis.Redis.from_url(settings.REDIS_URL).pexpire(crashed.key, 1)
    deadline = time.monotonic() + 2
    successor = RedisLock("test-expiry", client=backend_redis(), ttl_seconds=30)
    while not successor.acquire():
        assert time.monotonic() < deadline
    assert not crashed.renew()
    successor.release()


def test_redis_lock_reports_an_unreachable_server():
    lock = RedisLock("sweep", client=_unreachable())
    with pytest.raises(LockUnavailable):
        lock.acquire()


@pytest.mark.django_db
def test_an_unreachable_lock_backend_means_no_sweep(alice):
    attachment = make_attachment(alice)
    report = sweep_expired(now=T0 + 8 * DAY, lock=RedisLock("sweep", client=_unreachable()))
    assert report.mode == "lock_busy" and report.error_messages
    attachment.refresh_from_db()
    assert attachment.lifecycle == "staged"


@pytest.mark.redis
def test_redis_locks_of_two_key_prefixes_are_independent(settings):
    """Two installs (or test runs) sharing one Redis each run their own sweeper."""
    ours = RedisLock("sweep", client=backend_redis())
    assert ours.acquire()
    try:
        settings.AIRLOCK_KEY_PREFIX = f"{settings.AIRLOCK_KEY_PREFIX}-other"
        theirs = RedisLock("sweep", client=backend_redis())
        assert theirs.key != ours.key
        assert theirs.acquire()
        theirs.release()
    finally:
        ours.release()
