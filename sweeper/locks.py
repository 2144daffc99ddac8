"""One sweeper at a time: a lock with a token and an expiry, renewed while the holder works.

With REDIS_URL set the lock lives in Redis (redis-py's Lock: SET NX PX with a
random token, token-checked extend and release). Without Redis it is a lease
row in the database, taken under a row lock. Either way a crashed holder's
lock expires on its own, and a holder that lost its lock notices at the next
renewal and stops.

The lock is a scheduling guarantee, not the safety net: each sweep batch also
locks its rows and re-checks them, so even two overlapping sweeps never delete
the same object twice or touch a committed row.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, Protocol

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from attachments.shared_redis import backend_redis

from .models import SweeperLease

if TYPE_CHECKING:
    import redis

log = logging.getLogger("airlock.sweeper")

DEFAULT_TTL_SECONDS = 300


class LockUnavailable(Exception):
    """The lock backend itself did not answer (not the same as "someone else holds it")."""


class SweepLock(Protocol):
    name: str

    def acquire(self) -> bool: ...

    def renew(self) -> bool: ...

    def release(self) -> None: ...


def redis_lock_key(name: str) -> str:
    return f"{settings.AIRLOCK_KEY_PREFIX}:lock:{name}"


def _holder() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"[:200]


class RedisLock:
    """redis-py's Lock, non-blocking, not thread-local (the token is ours, not the thread's)."""

    def __init__(self, name: str, *, client: redis.Redis, ttl_seconds: int = DEFAULT_TTL_SECONDS) -> None:
        self.name = name
        # Under the deployment's key prefix: two installs (or test runs) sharing one Redis
        # never hold each other's sweeper; the default prefix keeps the old key.
        self.key = redis_lock_key(name)
        self._lock = client.lock(self.key, timeout=ttl_seconds, blocking=False, thread_local=False)

    def acquire(self) -> bool:
        import redis

        try:
            return bool(self._lock.acquire(blocking=False))
        except redis.RedisError as exc:
            raise LockUnavailable(f"redis lock {self.name}: {exc}") from exc

    def renew(self) -> bool:
        import redis

        try:
            self._lock.reacquire()  # resets the TTL, only if our token still holds the key
        except redis.exceptions.LockError:
            return False
        except redis.RedisError as exc:
            log.warning("could not renew the sweep lock", extra={"lock": self.name, "error": str(exc)})
            return False
        return True

    def release(self) -> None:
        import redis

        try:
            self._lock.release()
        except redis.exceptions.LockError:
            log.warning("sweep lock was lost before release", extra={"lock": self.name})
        except redis.RedisError as exc:  # it expires on its own
            log.warning("could not release the sweep lock", extra={"lock": self.name, "error": str(exc)})


class DatabaseLock:
    """A lease row: taken under SELECT FOR UPDATE when free or expired, renewed by token."""

    def __init__(self, name: str, *, ttl_seconds: int = DEFAULT_TTL_SECONDS) -> None:
        self.name = name
        self.ttl = timedelta(seconds=ttl_seconds)
        self.token = uuid.uuid4().hex

    def acquire(self) -> bool:
        now = timezone.now()
        try:
            with transaction.atomic():
                lease = SweeperLease.objects.select_for_update().filter(name=self.name).first()
                if lease is None:
                    SweeperLease.objects.create(
                        name=self.name, token=self.token, holder=_holder(), expires_at=now + self.ttl
                    )
                    return True
                if lease.token and lease.token != self.token and lease.expires_at > now:
                    return False
                lease.token, lease.holder, lease.expires_at = self.token, _holder(), now + self.ttl
                lease.save()
                return True
        except IntegrityError:  # another instance created the row first
            return False

    def renew(self) -> bool:
        return bool(
            SweeperLease.objects.filter(name=self.name, token=self.token).update(expires_at=timezone.now() + self.ttl)
        )

    def release(self) -> None:
        SweeperLease.objects.filter(name=self.name, token=self.token).update(
            token="", holder="", expires_at=timezone.now()
        )


class NoLock:
    """For callers that already hold a lock of their own (and for tests of row-level safety)."""

    def __init__(self, name: str = "none") -> None:
        self.name = name

    def acquire(self) -> bool:
        return True

    def renew(self) -> bool:
        return True

    def release(self) -> None:
        return None


def make_lock(name: str, *, ttl_seconds: int = DEFAULT_TTL_SECONDS) -> SweepLock:
    """The lock for `name` on the configured backend: Redis when REDIS_URL is set, else the database."""
    if getattr(settings, "REDIS_URL", None):
        return RedisLock(name, client=backend_redis(), ttl_seconds=ttl_seconds)
    return DatabaseLock(name, ttl_seconds=ttl_seconds)


@contextmanager
def holding(lock: SweepLock, errors: list[str]) -> Iterator[bool]:
    """True inside the block while `lock` is held (released after it); False when another run holds it
    or the lock's backend did not answer (its message added to `errors`)."""
    try:
        acquired = lock.acquire()
    except LockUnavailable as exc:
        acquired = False
        errors.append(str(exc))
    if not acquired:
        yield False
        return
    try:
        yield True
    finally:
        lock.release()
