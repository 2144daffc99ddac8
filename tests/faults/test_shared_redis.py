"""Several test runs (and engineers) share one Redis: a run must never wipe another run's keys.

Found while writing the worker-kill tests: the suite's autouse cache clearing
called cache.clear(), which is FLUSHDB on Redis, so every test of one run
deleted the queued jobs, locks and rate-limit slots of every other run on the
same server (jobs of a concurrently running live-worker test simply vanished).
"""

from __future__ import annotations

import uuid

import pytest
from django.conf import settings


@pytest.mark.redis
def test_clearing_the_test_cache_leaves_other_runs_keys_alone(request):
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=3)
    foreign = f"airlock-fault-other-run-{uuid.uuid4().hex}:intake.msgs"
    client.set(foreign, b"a queued job of another run", ex=60)
    own_prefix = settings.CACHES["default"]["KEY_PREFIX"]
    from django.core.cache import cache

    cache.set("fault-own-key", 1, timeout=60)
    try:
        # Run the suite's autouse cache-clearing fixture once more, as the next test would.
        definition = request._fixturemanager.getfixturedefs("_clear_cache", request.node)[-1]
        clearing = definition.func()
        next(clearing)
        assert client.get(foreign) == b"a queued job of another run"
        assert cache.get("fault-own-key") is None, f"this run's keys ({own_prefix}:*) are cleared"
    finally:
        client.delete(foreign)
