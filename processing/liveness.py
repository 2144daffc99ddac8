"""Which worker processes are alive: each one beats every few seconds; the reconciler notices who stopped.

A worker killed with SIGKILL says nothing, and what it held stays held: its
leases until they expire, and on Redis the messages it had fetched but not
acked, which the broker hands back only once its own heartbeat times out and a
random maintenance pass runs (minutes). The reconciler cannot see those
messages; it sees that a worker stopped beating and re-drives, from the
database, every file whose job could have been in that worker's hands.

While it beats, a worker also renews the leases of the jobs its threads are
running (processing/inflight.py), so a lease only runs out when the worker
holding it is gone, however long the step takes.

The registry lives in Redis when configured (shared by every worker process
and the scheduler), else in this process's memory (embedded mode: the worker
and the scheduler are one process, and nothing survives it anyway).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Protocol

from django.conf import settings

log = logging.getLogger("airlock.runtime")


def beat_seconds() -> float:
    """How often a worker beats: several times per lease, so one late beat does not make it look dead."""
    return max(0.5, min(settings.AIRLOCK_LEASE_SECONDS / 4, 15.0))


def lost_after_seconds() -> float:
    """Silent this long, a worker is taken for dead: three missed beats (never longer than a lease).

    A false alarm costs duplicates only (every job is idempotent) and the worker
    registers again with its next beat.
    """
    return min(float(settings.AIRLOCK_LEASE_SECONDS), 3 * beat_seconds() + 1)


class Registry(Protocol):
    """Last beats by worker id, on one clock (Redis's own when shared: hosts' clocks may disagree)."""

    def beat(self, worker_id: str, at: float | None = None) -> None: ...

    def leave(self, worker_id: str) -> bool: ...

    def silent_for(self, seconds: float) -> list[tuple[str, float]]: ...

    def beating_within(self, seconds: float) -> int: ...


class MemoryRegistry:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[str, float] = {}

    def beat(self, worker_id: str, at: float | None = None) -> None:
        with self._lock:
            self._seen[worker_id] = time.time() if at is None else at

    def leave(self, worker_id: str) -> bool:
        with self._lock:
            return self._seen.pop(worker_id, None) is not None

    def silent_for(self, seconds: float) -> list[tuple[str, float]]:
        before = time.time() - seconds
        with self._lock:
            return [(worker, at) for worker, at in self._seen.items() if at < before]

    def beating_within(self, seconds: float) -> int:
        since = time.time() - seconds
        with self._lock:
            return sum(1 for at in self._seen.values() if at >= since)


class RedisRegistry:
    """A sorted set `<prefix>-workers`: member = worker id, score = its last beat by Redis's clock."""

    def __init__(self, url: str, prefix: str) -> None:
        import redis

        self._client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
        self._key = f"{prefix}-workers"

    def _now(self) -> float:
        seconds, micros = self._client.time()
        return seconds + micros / 1_000_000

    def beat(self, worker_id: str, at: float | None = None) -> None:
        self._client.zadd(self._key, {worker_id: self._now() if at is None else at})

    def leave(self, worker_id: str) -> bool:
        return bool(self._client.zrem(self._key, worker_id))

    def silent_for(self, seconds: float) -> list[tuple[str, float]]:
        found: list[tuple[bytes, float]] = self._client.zrangebyscore(
            self._key, "-inf", f"({self._now() - seconds}", withscores=True
        )  # type: ignore[assignment]
        return [(member.decode(), float(score)) for member, score in found]

    def beating_within(self, seconds: float) -> int:
        return int(self._client.zcount(self._key, self._now() - seconds, "+inf"))


_this_worker = ""


def this_worker() -> str:
    """The id this process's worker beats under ("" outside a worker)."""
    return _this_worker


_registry: Registry | None = None
_registry_lock = threading.Lock()


def registry() -> Registry:
    global _registry
    with _registry_lock:
        if _registry is None:
            url = settings.REDIS_URL
            _registry = RedisRegistry(url, settings.AIRLOCK_KEY_PREFIX) if url else MemoryRegistry()
        return _registry


class Heartbeat(threading.Thread):
    """One worker process's beat: say it is alive, and renew the leases its job threads hold."""

    def __init__(self) -> None:
        global _this_worker
        super().__init__(name="airlock-heartbeat", daemon=True)
        self.worker_id = _this_worker = uuid.uuid4().hex
        self.stopping = threading.Event()

    def beat_once(self) -> None:
        from . import inflight

        try:
            registry().beat(self.worker_id)
        except Exception as exc:  # Redis is down: the reconciler may take us for dead; duplicates are harmless
            log.warning("worker heartbeat failed", extra={"error": str(exc)[:300]})
        inflight.renew_held()

    def run(self) -> None:
        while not self.stopping.wait(beat_seconds()):
            self.beat_once()

    def stop(self) -> None:
        """A worker stopping on purpose hands its messages and leases back itself: it is not a lost worker."""
        self.stopping.set()
        try:
            registry().leave(self.worker_id)
        except Exception as exc:
            log.warning("could not leave the worker registry", extra={"error": str(exc)[:300]})
