"""Per-tenant slots at each stage, with a waiting room instead of timed retries.

A tenant may hold at most N slots of a stage at once (intake, scan, derive; and
a webhook endpoint N delivery slots: processing/fairness.py says why and how),
so one tenant's backlog cannot take every worker. A job that finds its tenant's slots full is *parked* (taken
off the queue, so other tenants' jobs move freely) and sent again the moment one
of that tenant's running jobs releases its slot. Pushing it back with a delay
instead left slots idle for the whole delay: a single-tenant burst ran at a
third of the machine's capacity.

Acquire-or-park and release-and-pop are each atomic (a Lua script on Redis, a
lock in-process), so a job cannot be parked just after the last holder looked
for waiters. A worker killed mid-job has its slots released by the reconciler
once it stops beating (processing/liveness.py), which sends the jobs parked
behind them again; holders also carry an expiry (`ttl_ms`) as the last resort.
A slot freed by expiry has no release to hand it over, so every scheduler tick
looks at the waiting rooms itself (processing/recovery.py): in each pool with
parked jobs it drops the expired holders and, in the same atomic step
(`wake_free`), pops as many parked jobs as the pool's limit (the one acquire
uses) leaves free; they are sent again as a release sends its one. A pool at
its limit with live holders is left alone. A job woken while another is already
on its way to the same free slot (a release's, or another scheduler's) is only
parked again, at the back: one message more, nothing else.
A parked job lost with its process (in-process backend) or with Redis is
re-driven by the lease reconciler like any job lost in a broker.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from attachments.shared_redis import ProcessSingleton

if TYPE_CHECKING:
    import redis

# Admission: expired holders are dropped only when the pool looks full (under its limit
# they keep nobody out). The key's expiry is set with its first holder, then only ever
# lengthened: stages' holders live for different times, and the key's expiry must not
# drop a longer-lived holder along with a shorter one. Without a waiting room (KEYS[2]) a
# caller that cannot wait (a web request) is refused instead of parked.
_ACQUIRE_OR_PARK = """
local now = tonumber(ARGV[1])
local held = redis.call('ZCARD', KEYS[1])
if held >= tonumber(ARGV[3]) then
  held = held - redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
end
if held < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[4]), ARGV[2])
  if held == 0 or redis.call('PTTL', KEYS[1]) < tonumber(ARGV[4]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[4])
  end
  return 1
end
if KEYS[2] then
  redis.call('RPUSH', KEYS[2], ARGV[5])
  redis.call('PEXPIRE', KEYS[2], ARGV[6])
end
return 0
"""

_RELEASE_AND_POP = """
redis.call('ZREM', KEYS[1], ARGV[1])
return redis.call('LPOP', KEYS[2])
"""

_DROP_EXPIRED_AND_POP = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[1]))
local free = tonumber(ARGV[2]) - redis.call('ZCARD', KEYS[1])
local woken = {}
while free > 0 do
  local parked = redis.call('LPOP', KEYS[2])
  if not parked then break end
  woken[#woken + 1] = parked
  free = free - 1
end
return woken
"""


# Pools of slots have their own keys: "tenant" is the pipeline's (a tenant's intake,
# scan and derive jobs share it), "webhook" an endpoint's deliveries' (fairness.py).
DERIVE = "tenant"


class SlotsBackend(Protocol):
    def acquire_or_park(
        self, tenant: str, holder: str, parked: str, *, limit: int, ttl_ms: int, park_ttl_ms: int, stage: str = DERIVE
    ) -> bool: ...

    def acquire(self, tenant: str, holder: str, *, limit: int, ttl_ms: int, stage: str = DERIVE) -> bool: ...

    def release(self, tenant: str, holder: str, *, stage: str = DERIVE) -> str | None: ...

    def holders_of(self, tenant: str, attachment_id: str, *, stage: str = DERIVE) -> list[str]: ...

    def holders_of_worker(self, worker_id: str) -> list[tuple[str, str, str]]: ...

    def parked_files(self, tenant: str, *, stage: str = DERIVE) -> set[str]: ...

    def pools_with_parked(self) -> list[tuple[str, str]]: ...

    def wake_free(self, tenant: str, *, limit: int, stage: str = DERIVE) -> list[str]: ...


def holder_name(attachment_id: object) -> str:
    """Holders are named after their file and their worker, so the reconciler can free a dead job's slot.

    By file when the file's lease runs out; by worker when the worker stops
    beating (processing/liveness.py), whatever became of the file meanwhile.
    """
    from .liveness import this_worker

    return f"{attachment_id}/{uuid.uuid4().hex[:12]}@{this_worker()}"


class MemorySlots:
    """One process's slots (embedded mode: the in-process broker lives in the same process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders: dict[tuple[str, str], dict[str, float]] = {}  # (stage, tenant) -> holder -> expiry
        self._waiting: dict[tuple[str, str], deque[str]] = {}

    def acquire_or_park(
        self, tenant: str, holder: str, parked: str, *, limit: int, ttl_ms: int, park_ttl_ms: int, stage: str = DERIVE
    ) -> bool:
        now = time.monotonic()
        with self._lock:
            holders = self._holders.setdefault((stage, tenant), {})
            for stale in [h for h, expires in holders.items() if expires <= now]:
                del holders[stale]
            if len(holders) < limit:
                holders[holder] = now + ttl_ms / 1000
                return True
            self._waiting.setdefault((stage, tenant), deque()).append(parked)
            return False

    def acquire(self, tenant: str, holder: str, *, limit: int, ttl_ms: int, stage: str = DERIVE) -> bool:
        """A slot now, or False (nothing parked): for work done in a web request, which answers 503 instead."""
        now = time.monotonic()
        with self._lock:
            holders = self._holders.setdefault((stage, tenant), {})
            for stale in [h for h, expires in holders.items() if expires <= now]:
                del holders[stale]
            if len(holders) >= limit:
                return False
            holders[holder] = now + ttl_ms / 1000
            return True

    def release(self, tenant: str, holder: str, *, stage: str = DERIVE) -> str | None:
        with self._lock:
            self._holders.get((stage, tenant), {}).pop(holder, None)
            waiting = self._waiting.get((stage, tenant))
            if not waiting:
                return None
            parked = waiting.popleft()
            if not waiting:
                del self._waiting[(stage, tenant)]
            return parked

    def parked_files(self, tenant: str, *, stage: str = DERIVE) -> set[str]:
        with self._lock:
            return _files(self._waiting.get((stage, tenant), ()))

    def pools_with_parked(self) -> list[tuple[str, str]]:
        with self._lock:
            return [pool for pool, waiting in self._waiting.items() if waiting]

    def wake_free(self, tenant: str, *, limit: int, stage: str = DERIVE) -> list[str]:
        """Drop expired holders, then pop as many parked jobs as slots are free (none at the limit)."""
        now = time.monotonic()
        with self._lock:
            holders = self._holders.get((stage, tenant), {})
            for stale in [h for h, expires in holders.items() if expires <= now]:
                del holders[stale]
            waiting = self._waiting.get((stage, tenant))
            if not waiting:
                return []
            woken = [waiting.popleft() for _ in range(min(len(waiting), max(0, limit - len(holders))))]
            if not waiting:
                del self._waiting[(stage, tenant)]
            return woken

    def holders_of(self, tenant: str, attachment_id: str, *, stage: str = DERIVE) -> list[str]:
        with self._lock:
            return [h for h in self._holders.get((stage, tenant), {}) if h.startswith(f"{attachment_id}/")]

    def holders_of_worker(self, worker_id: str) -> list[tuple[str, str, str]]:
        with self._lock:
            return [
                (stage, tenant, h)
                for (stage, tenant), holders in self._holders.items()
                for h in holders
                if h.endswith(f"@{worker_id}")
            ]


class RedisSlots:
    """Slots shared by every worker process through Redis."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self._client = client
        self._prefix = prefix
        self._acquire = self._client.register_script(_ACQUIRE_OR_PARK)
        self._release = self._client.register_script(_RELEASE_AND_POP)
        self._wake = self._client.register_script(_DROP_EXPIRED_AND_POP)

    def _keys(self, tenant: str, stage: str) -> list[str]:
        return [f"{self._prefix}-{stage}-slots-{tenant}", f"{self._prefix}-{stage}-waiting-{tenant}"]

    def acquire_or_park(
        self, tenant: str, holder: str, parked: str, *, limit: int, ttl_ms: int, park_ttl_ms: int, stage: str = DERIVE
    ) -> bool:
        now_ms = int(time.time() * 1000)
        return bool(
            self._acquire(keys=self._keys(tenant, stage), args=[now_ms, holder, limit, ttl_ms, parked, park_ttl_ms])
        )

    def acquire(self, tenant: str, holder: str, *, limit: int, ttl_ms: int, stage: str = DERIVE) -> bool:
        """A slot now, or False (nothing parked): for work done in a web request, which answers 503 instead."""
        now_ms = int(time.time() * 1000)
        return bool(self._acquire(keys=self._keys(tenant, stage)[:1], args=[now_ms, holder, limit, ttl_ms]))

    def release(self, tenant: str, holder: str, *, stage: str = DERIVE) -> str | None:
        popped = self._release(keys=self._keys(tenant, stage), args=[holder])
        return popped.decode() if isinstance(popped, bytes) else popped

    def parked_files(self, tenant: str, *, stage: str = DERIVE) -> set[str]:
        return _files(_text(raw) for raw in self._client.lrange(self._keys(tenant, stage)[1], 0, -1))

    def pools_with_parked(self) -> list[tuple[str, str]]:
        """Every waiting room, looked through (a scan per tick; an empty list has no key)."""
        return self._scan_pools("waiting")

    def wake_free(self, tenant: str, *, limit: int, stage: str = DERIVE) -> list[str]:
        """Drop expired holders, then pop as many parked jobs as slots are free (none at the limit)."""
        now_ms = int(time.time() * 1000)
        return [_text(raw) for raw in self._wake(keys=self._keys(tenant, stage), args=[now_ms, limit])]

    def holders_of(self, tenant: str, attachment_id: str, *, stage: str = DERIVE) -> list[str]:
        return [
            m
            for m in map(_text, self._client.zrange(self._keys(tenant, stage)[0], 0, -1))
            if m.startswith(f"{attachment_id}/")
        ]

    def holders_of_worker(self, worker_id: str) -> list[tuple[str, str, str]]:
        """Every stage's and tenant's slots, looked through (a lost worker is rare; slots held are few)."""
        found = []
        for stage, tenant in self._scan_pools("slots"):
            found += [
                (stage, tenant, m)
                for m in map(_text, self._client.zrange(self._keys(tenant, stage)[0], 0, -1))
                if m.endswith(f"@{worker_id}")
            ]
        return found

    def _scan_pools(self, kind: str) -> list[tuple[str, str]]:
        """(stage, tenant) of every `<prefix>-<stage>-<kind>-<tenant>` key."""
        prefix = f"{self._prefix}-"
        pools: dict[tuple[str, str], None] = {}  # a scan may return a key twice: each pool once
        for key in map(_text, self._client.scan_iter(match=f"{prefix}*-{kind}-*", count=500)):
            stage, _, tenant = key[len(prefix) :].partition(f"-{kind}-")
            if stage and "-" not in stage:  # else another install's key, under a longer prefix that starts like ours
                pools[(stage, tenant)] = None
        return list(pools)


# Redis when configured (shared by all workers), else this process's own slots.
backend: ProcessSingleton[SlotsBackend] = ProcessSingleton(RedisSlots, MemorySlots)


def encode(args: tuple) -> str:
    return json.dumps([str(a) for a in args])


def decode(parked: str) -> tuple[str, ...] | None:
    try:
        value = json.loads(parked)
    except ValueError:
        return None
    return tuple(value) if isinstance(value, list) and all(isinstance(v, str) for v in value) else None


def _text(raw: object) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def _files(parked: Iterable[str]) -> set[str]:
    """Attachment ids of parked payloads (the first argument of each job)."""
    return {args[0] for args in map(decode, parked) if args}
