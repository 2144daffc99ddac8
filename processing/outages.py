"""Infrastructure trouble is not the file's fault: retry the job in the worker, and wait out a dependency that is down.

Two rules, in this order:

- A database disconnect or a Redis hiccup while a job runs (a PostgreSQL
  restart, a failover, a dropped connection) makes the actor run the job again
  in the same worker, with backoff and jitter, for up to JOB_RETRY_SECONDS,
  before the message would be dropped. Every stage is idempotent (the lease
  decides), so running it again is safe; no attempt is counted, and the file
  does not wait for its lease.
- A stage that fails because a dependency it needs (a scanner, storage) is
  down, as a fresh probe of that dependency confirms, hands the file back to
  pending without counting an attempt and tries again every few seconds
  (DEPENDENCY_WAIT_SECONDS). Its attempts only run out while its dependencies
  answer: `failed` is a file that keeps failing against healthy dependencies.
"""

from __future__ import annotations

import copy
import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

import redis
from django.db import InterfaceError, OperationalError, connections

from attachments.services.processing import DEPENDENCY_WAIT_SECONDS
from attachments.storage import get_gateway

from .scanners import ScannerError, scanners_from_settings

log = logging.getLogger("airlock.pipeline")

T = TypeVar("T")

# Long enough for a database restart or a failover (seconds to tens of seconds);
# past it the error propagates and the lease or the reconciler takes over.
JOB_RETRY_SECONDS = 60.0
JOB_RETRY_FIRST_DELAY = 0.25
JOB_RETRY_MAX_DELAY = 5.0

# A storage 5xx or timeout inside a stage: the stage's work runs again this long
# before the storage is probed (and the file waits for it, or an attempt counts).
STORAGE_RETRY_SECONDS = 5.0

# What a fresh probe of a dependency may take (a stage's own timeouts are longer).
PROBE_TIMEOUT_SECONDS = 2.0


def infrastructure_errors() -> tuple[type[BaseException], ...]:
    """Errors of the database, or of Redis (the broker, the tenant slots), that a moment later may be gone."""
    return (OperationalError, InterfaceError, redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


def jittered(nominal: float) -> float:
    """±50 % of `nominal`, so jobs that failed together do not come back together."""
    return nominal * (0.5 + random.random())


def _drop_broken_connections() -> None:
    """A connection that saw a disconnect is unusable; the next query opens a fresh one."""
    for conn in connections.all(initialized_only=True):
        try:
            if conn.in_atomic_block:
                continue
            conn.close()
        except Exception:  # noqa: BLE001 - closing a dead socket may raise too
            pass


def run_through_blips(
    run: Callable[[], T],
    *,
    what: str,
    budget: float | None = None,
    errors: tuple[type[BaseException], ...] | None = None,
) -> T:
    """Call `run`; on a database or Redis error (or `errors`) call it again with backoff and jitter, for `budget` s."""
    errors = errors or infrastructure_errors()
    deadline = time.monotonic() + (JOB_RETRY_SECONDS if budget is None else budget)
    nominal = JOB_RETRY_FIRST_DELAY
    tries = 0
    while True:
        try:
            return run()
        except errors as exc:
            tries += 1
            delay = jittered(nominal)
            if time.monotonic() + delay > deadline:
                log.warning(
                    "infrastructure error: giving the job up",
                    extra={"step": what, "tries": tries, "error": str(exc)[:300]},
                )
                raise
            log.warning(
                "infrastructure error: running the job again",
                extra={"step": what, "tries": tries, "delay_s": round(delay, 2), "error": str(exc)[:300]},
            )
            _drop_broken_connections()
            time.sleep(delay)
            nominal = min(JOB_RETRY_MAX_DELAY, nominal * 2)


def dependency_wait_seconds() -> float:
    """The delay before a file waiting for a dependency tries again."""
    return jittered(DEPENDENCY_WAIT_SECONDS)


def _scanners_down() -> str | None:
    for scanner in scanners_from_settings():
        probe = scanner
        if hasattr(probe, "timeout"):
            probe = copy.copy(scanner)
            probe.timeout = min(float(probe.timeout), PROBE_TIMEOUT_SECONDS)  # type: ignore[attr-defined]
        try:
            probe.ping()
        except Exception as exc:  # noqa: BLE001 - whatever a broken scanner raises, it is down
            return f"scanner {scanner.name}: {str(exc)[:200]}"
    return None


def _storage_down() -> str | None:
    try:
        get_gateway().ping()
    except Exception as exc:  # noqa: BLE001 - whatever the gateway raises, storage does not answer
        return f"storage: {str(exc)[:200]}"
    return None


def dependency_down(exc: BaseException) -> str | None:
    """The dependency behind `exc` when a fresh probe finds it down ("scanner clamd: …"); None when it answers.

    Only the dependency the error points at is probed: a scanner error probes the
    scanners, a storage error (or any other) the storage.
    """
    if isinstance(exc, ScannerError):
        return _scanners_down()
    return _storage_down()
