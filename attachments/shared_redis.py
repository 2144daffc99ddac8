"""One Redis client per process for the web side's own commands (status announcements, intent counters)."""

from __future__ import annotations

import threading

from django.conf import settings

_client = None
_lock = threading.Lock()


def shared_redis():
    """The process's client for `REDIS_URL` (redis-py pools connections; one client serves every thread)."""
    global _client
    if _client is None:
        with _lock:
            if _client is None:
                import redis

                _client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5, socket_connect_timeout=2)
    return _client
