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

A worker's id names its process (`<pid space>:<pid>:<random>`), so a process
that shares its pid space (the same host and pid namespace: a sibling worker,
the next group after a restart, the scheduler beside them) sees at once that
the process is gone, without waiting for three missed beats: it marks the
worker silent (mark_gone_workers), and the reconciler's next tick frees the
slots and leases it held.

The registry lives in Redis when configured (shared by every worker process
and the scheduler), else in this process's memory (embedded mode: the worker
and the scheduler are one process, and nothing survives it anyway).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from django.conf import settings

from attachments.shared_redis import ProcessSingleton

if TYPE_CHECKING:
    import redis

log = logging.getLogger("airlock.runtime")


def beat_seconds() -> float:
    """How often a worker beats: several times per lease, so one late beat does not make it look dead."""
    return max(0.5, min(settings.AIRLOCK_RETRIES.lease_seconds / 4, 15.0))


def lost_after_seconds() -> float:
    """Silent this long, a worker is taken for dead: three missed beats (never longer than a lease).

    A false alarm costs duplicates only (every job is idempotent) and the worker
    registers again with its next beat.
    """
    return min(float(settings.AIRLOCK_RETRIES.lease_seconds), 3 * beat_seconds() + 1)


class Registry(Protocol):
    """Last beats by worker id, on one clock (Redis's own when shared: hosts' clocks may disagree)."""

    def beat(self, worker_id: str, at: float | None = None) -> None: ...

    def leave(self, worker_id: str) -> bool: ...

    def silent_for(self, seconds: float) -> list[tuple[str, float]]: ...

    def beating_within(self, seconds: float) -> int: ...

    def members(self) -> list[str]: ...


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

    def members(self) -> list[str]:
        with self._lock:
            return list(self._seen)


class RedisRegistry:
    """A sorted set `<prefix>-workers`: member = worker id, score = its last beat by Redis's clock."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self._client = client
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

    def members(self) -> list[str]:
        found: list[bytes] = self._client.zrange(self._key, 0, -1)  # type: ignore[assignment]
        return [member.decode() for member in found]


_this_worker = ""


def this_worker() -> str:
    """The id this process's worker beats under ("" outside a worker)."""
    return _this_worker


registry: ProcessSingleton[Registry] = ProcessSingleton(RedisRegistry, MemoryRegistry)


# The beat a worker whose process is gone is given: older than any silence, and telling.
GONE_BEAT = 0.0


@functools.cache
def pid_space() -> str:
    """Which processes see each other's pids: this kernel's boot and this pid namespace ("" when unknown)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", "")[:16]
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return ""
    return f"{boot}.{namespace}"


def new_worker_id() -> str:
    """`<pid space>:<pid>:<random>`, or only the random part where the pid space is unknown."""
    space = pid_space()
    return f"{space}:{os.getpid()}:{uuid.uuid4().hex}" if space else uuid.uuid4().hex


def process_gone(worker_id: str) -> bool:
    """The worker's process is known to be gone: it ran in this pid space, and its pid is free or a zombie.

    A pid taken again by another process makes a dead worker look alive: it is
    then found by its missed beats, as a worker elsewhere is.
    """
    space, _, rest = worker_id.partition(":")
    pid_text, _, _ = rest.partition(":")
    if not space or space != pid_space() or not pid_text.isdigit() or int(pid_text) == os.getpid():
        return False
    try:
        stat = Path(f"/proc/{pid_text}/stat").read_text()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    # "pid (comm) state …": a killed child its parent has not reaped yet is a zombie, as dead.
    return stat.rpartition(")")[2].split()[:1] == ["Z"]


def mark_gone_workers() -> int:
    """Mark silent every worker of this pid space whose process is gone; the reconciler's next tick handles it.

    Its beat is set to the epoch, so the reconciler takes it for lost at once
    (recovery.redrive_after_lost_workers) instead of after three missed beats.
    """
    workers = registry()
    gone = [worker_id for worker_id in workers.members() if process_gone(worker_id)]
    for worker_id in gone:
        workers.beat(worker_id, at=GONE_BEAT)
    if gone:
        log.warning("worker processes gone: marked lost", extra={"count": len(gone)})
    return len(gone)


class Heartbeat(threading.Thread):
    """One worker process's beat: say it is alive, and renew the leases its job threads hold."""

    def __init__(self) -> None:
        global _this_worker
        super().__init__(name="airlock-heartbeat", daemon=True)
        self.worker_id = _this_worker = new_worker_id()
        self.stopping = threading.Event()

    def beat_once(self) -> None:
        from . import inflight

        try:
            registry().beat(self.worker_id)
            mark_gone_workers()  # a sibling killed beside us (or a predecessor) is lost now, not in three beats
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
