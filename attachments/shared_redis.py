"""One Redis client per process, and the backends that live in Redis when it is configured, else in memory."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

from django.conf import settings

if TYPE_CHECKING:
    import redis

_clients: dict[float, redis.Redis] = {}
_lock = threading.Lock()

T = TypeVar("T")


def shared_redis(*, connect_timeout: float = 2) -> redis.Redis:
    """The process's client for `REDIS_URL` (redis-py pools connections; one client serves every thread).

    Commands time out after 5 s; one client per connect timeout.
    """
    client = _clients.get(connect_timeout)
    if client is None:
        with _lock:
            client = _clients.get(connect_timeout)
            if client is None:
                import redis

                client = redis.Redis.from_url(
                    str(settings.REDIS_URL), socket_timeout=5, socket_connect_timeout=connect_timeout
                )
                _clients[connect_timeout] = client
    return client


def backend_redis() -> redis.Redis:
    """The client for the pipeline's shared state (slots, worker beats, sweeper locks, the broker's epoch).

    It waits 5 s to connect, where the web side's own commands (status announcements, intent counters) give up after 2.
    """
    return shared_redis(connect_timeout=5)


class ProcessSingleton(Generic[T]):
    """The backend this process uses, built at first use: `on_redis(shared client, key prefix)` when
    REDIS_URL is set (shared by every process), else `in_memory()` (this process's own).

    A test puts its own in `value` (monkeypatch.setattr).
    """

    def __init__(self, on_redis: Callable[[redis.Redis, str], T], in_memory: Callable[[], T]) -> None:
        self._on_redis = on_redis
        self._in_memory = in_memory
        self._lock = threading.Lock()
        self.value: T | None = None

    def __call__(self) -> T:
        with self._lock:
            if self.value is None:
                if settings.REDIS_URL:
                    self.value = self._on_redis(backend_redis(), settings.AIRLOCK_KEY_PREFIX)
                else:
                    self.value = self._in_memory()
            return self.value
