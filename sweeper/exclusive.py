"""One sweeper run at a time: hold a run's lock for a block, or say why it could not be held."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from .locks import LockUnavailable, SweepLock


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
