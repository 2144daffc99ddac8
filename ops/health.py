"""Readiness: can this process reach what a request or a job needs right now?

Five checks, each bounded by AIRLOCK_READYZ_TIMEOUT_SECONDS and run
concurrently, so `/readyz` answers within about one timeout even when a
dependency hangs instead of refusing:

- database: a fresh connection (not the request's) runs ``SELECT 1``;
- broker: Redis PING, or a RabbitMQ connection, or the in-process stub (always up);
- storage: the storage gateway's ``ping()``, and each storage-event queue
  consumer's backlog and last poll (``queues``);
- scanner: every configured scanner's ``ping()`` (clamd PING, YARA rules compiled);
- sandbox: the confinement a decoder job gets on this host (``uid+nnp+seccomp+
  landlock+nproc+subreaper`` when root on a Landlock kernel), any requested layer this
  host cannot apply, and what a job is not protected from without it. It fails when
  such a layer is not accepted by AIRLOCK_SANDBOX_ACCEPT_MISSING (no decoder job runs
  then) and on an invalid configuration.

- uploads: the tenants whose new uploads the backlog check refuses now
  (attachments/services/backlog.py);
- brakes: the sweeper's killswitch or dry run, when on.

Every check reports ``{"ok", "latency_ms", "error"}``; one failed check makes
the whole answer "unavailable" (HTTP 503), and the body still lists them all.
A check that passes in a reduced mode says ``"state": "degraded: <reason>"``
(the sandbox with an accepted missing layer, paused uploads, an active brake):
still ready, HTTP 200, and every such reason is listed in the top-level
``"degraded"``.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

log = logging.getLogger("airlock.health")

DEFAULT_TIMEOUT_SECONDS = 2.0
DEGRADED = "degraded: "


@dataclass
class CheckResult:
    ok: bool
    latency_ms: float
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"ok": self.ok, "latency_ms": self.latency_ms, "error": self.error}
        data.update(self.details)
        return data


@dataclass
class Readiness:
    checks: dict[str, CheckResult]

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks.values())

    @property
    def degraded(self) -> list[str]:
        """ "<check>: <reason>" for every passing check that runs in a reduced mode."""
        return [
            f"{name}: {str(check.details['state'])[len(DEGRADED) :]}"
            for name, check in self.checks.items()
            if check.ok and str(check.details.get("state", "")).startswith(DEGRADED)
        ]

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": "ok" if self.ok else "unavailable",
            "degraded": self.degraded,
            "checks": {name: check.as_dict() for name, check in self.checks.items()},
        }


def timeout_seconds() -> float:
    return float(
        getattr(settings, "AIRLOCK_READYZ_TIMEOUT_SECONDS", DEFAULT_TIMEOUT_SECONDS) or DEFAULT_TIMEOUT_SECONDS
    )


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


# --- the checks: each raises when its dependency is not usable ------------------


def check_database(*, alias: str = "default", timeout: float | None = None) -> None:
    """Open a new connection with a short connect timeout and run SELECT 1.

    A fresh wrapper, not ``connections[alias]``: the check must not reuse (or
    break) the connection of the request or job that runs it, and a stale
    persistent connection must not make a dead server look alive.
    """
    from django.db import connections
    from django.db.utils import load_backend

    timeout = timeout or timeout_seconds()
    config = copy.deepcopy(connections.settings[alias])
    options = dict(config.get("OPTIONS") or {})
    options.pop("pool", None)  # a one-off connection, never a pool
    engine = config["ENGINE"]
    if "postgresql" in engine:
        options["connect_timeout"] = max(1, round(timeout))
    elif "sqlite3" in engine:
        options["timeout"] = timeout
    config["OPTIONS"] = options
    config["CONN_MAX_AGE"] = 0
    wrapper = load_backend(engine).DatabaseWrapper(config, alias)
    try:
        with wrapper.cursor() as cursor:
            cursor.execute("SELECT 1")
            if cursor.fetchone()[0] != 1:
                raise RuntimeError("SELECT 1 did not return 1")
    finally:
        wrapper.close()


def broker_kind() -> str:
    if getattr(settings, "REDIS_URL", None):
        return "redis"
    if getattr(settings, "RABBITMQ_URL", None):
        return "rabbitmq"
    return "stub"


def check_broker(*, timeout: float | None = None) -> None:
    """PING Redis or open a RabbitMQ connection; the in-process stub broker is always up."""
    timeout = timeout or timeout_seconds()
    kind = broker_kind()
    if kind == "redis":
        import redis

        url = settings.REDIS_URL
        if not url:
            raise RuntimeError("REDIS_URL is not set")
        client = redis.Redis.from_url(
            url,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry_on_timeout=False,
        )
        try:
            if not client.ping():
                raise RuntimeError("Redis did not answer PING")
        finally:
            client.close()
    elif kind == "rabbitmq":
        import pika

        params = pika.URLParameters(settings.RABBITMQ_URL)
        params.socket_timeout = timeout
        params.stack_timeout = timeout
        params.blocked_connection_timeout = timeout
        params.connection_attempts = 1
        connection = pika.BlockingConnection(params)
        connection.close()


def check_storage(*, timeout: float | None = None) -> dict[str, Any]:
    """The gateway's ping; and each storage-event queue consumer's lag, as it last reported it.

    A consumer that stopped polling without a clean stop makes the check degraded (still
    ready: uploads work, their events wait in the queue).
    """
    from django.db import DatabaseError

    from attachments.services.queue_consumers import queue_consumers_report
    from attachments.storage import get_gateway

    get_gateway().ping()
    try:
        queues = queue_consumers_report()
    except DatabaseError as exc:  # the database check reports the outage; storage itself answered
        return {"queues_error": _describe(exc)}
    stale = [q for q in queues if q["stale"]]
    if not stale:
        return {"state": "ok", "queues": queues} if queues else {}
    names = ", ".join(f"{q['name']} (last poll {q['polled_seconds_ago']:.0f} s ago)" for q in stale)
    return {"state": DEGRADED + f"storage-event consumer not polling: {names}", "queues": queues}


def _bounded_scanners(timeout: float) -> list[Any]:
    from processing.scanners import scanners_from_settings

    scanners = []
    for scanner in scanners_from_settings():
        if hasattr(scanner, "timeout"):
            # A ping must not wait as long as a scan of a 1 GiB file may.
            scanner = copy.copy(scanner)
            scanner.timeout = min(float(scanner.timeout), timeout)
        scanners.append(scanner)
    return scanners


def check_scanners(*, timeout: float | None = None) -> dict[str, Any]:
    """PING every configured scanner; raises if any is down, naming it."""
    timeout = timeout or timeout_seconds()
    results: dict[str, Any] = {}
    failures = []
    for scanner in _bounded_scanners(timeout):
        started = time.monotonic()
        try:
            scanner.ping()
        except Exception as exc:  # noqa: BLE001 - ScannerError, or whatever a broken scanner raises
            results[scanner.name] = {
                "ok": False,
                "latency_ms": _ms(started),
                "error": _describe(exc),
            }
            failures.append(f"{scanner.name}: {_describe(exc)}")
        else:
            results[scanner.name] = {"ok": True, "latency_ms": _ms(started), "error": None}
        results[scanner.name].update(getattr(scanner, "coverage", {}))  # what it can and cannot see
    if failures:
        raise _ScannerDown("; ".join(failures), results)
    return results


def check_sandbox() -> dict[str, Any]:
    """The sandbox layers this host applies to every decoder job (processing/sandbox/confine.py).

    Fails closed, as the fork server does: a requested layer this host cannot apply and
    AIRLOCK_SANDBOX_ACCEPT_MISSING does not accept means no decoder job runs here.
    """
    from processing.sandbox import confine

    posture = confine.posture()  # ValueError on an unknown layer in either setting
    details = {
        "confinement": confine.describe(posture.in_force),
        "missing": list(posture.missing),
        "state": posture.state,
        "unprotected": posture.unprotected(),
    }
    if posture.refused:
        raise _SandboxRefused(posture.state, details)
    return details


def check_uploads() -> dict[str, Any]:
    """Tenants whose new uploads are paused by the backlog check: ready, but degraded."""
    from attachments.notices import uploads_paused
    from attachments.services.backlog import paused_tenants

    paused = paused_tenants()
    if not paused:
        return {"state": "ok", "paused_tenants": []}
    return {
        "state": DEGRADED + " ".join(notice.message for notice in uploads_paused()),
        "paused_tenants": [row["tenant"] for row in paused],
    }


def check_brakes() -> dict[str, Any]:
    """The sweeper's brakes: on is a choice an operator made, so ready, but degraded."""
    from attachments.notices import brakes_on

    notices = brakes_on()
    return {"state": DEGRADED + " ".join(n.message for n in notices) if notices else "ok"}


# Checks whose result dict is reported as the check's details.
_DETAILED = ("storage", "sandbox", "uploads", "brakes")


class _SandboxRefused(Exception):
    def __init__(self, message: str, details: dict[str, Any]) -> None:
        super().__init__(message)
        self.details = details


class _ScannerDown(Exception):
    def __init__(self, message: str, results: dict[str, Any]) -> None:
        super().__init__(message)
        self.results = results


# --- running them, bounded ---------------------------------------------------


def _ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 2)


def _run(name: str, check: Callable[[], Any], timeout: float) -> Callable[[], CheckResult]:
    """Start `check` in a daemon thread now; the returned callable waits at most `timeout`.

    A daemon thread, because a check stuck in a C call (a TCP connect to a
    black-holed host) cannot be interrupted; the answer must not wait for it.
    """
    outcome: dict[str, Any] = {}
    done = threading.Event()
    started = time.monotonic()

    def target() -> None:
        from django.db import connections

        try:
            outcome["value"] = check()
        except BaseException as exc:  # noqa: BLE001 - reported, never raised: the probe must answer
            outcome["error"] = exc
        finally:
            outcome["latency_ms"] = _ms(started)
            connections.close_all()  # whatever this thread opened
            done.set()

    threading.Thread(target=target, name=f"airlock-readyz-{name}", daemon=True).start()

    def result() -> CheckResult:
        remaining = timeout - (time.monotonic() - started)
        if not done.wait(max(0.0, remaining)):
            return CheckResult(ok=False, latency_ms=_ms(started), error=f"timed out after {timeout:g}s")
        error = outcome.get("error")
        value = outcome.get("value")
        details: dict[str, Any] = {}
        if isinstance(error, _ScannerDown):
            details = {"scanners": error.results}
        elif isinstance(value, dict) and name == "scanner":
            details = {"scanners": value}
        elif isinstance(error, _SandboxRefused):
            details = error.details
        elif isinstance(value, dict) and name in _DETAILED:
            details = value
        return CheckResult(
            ok=error is None,
            latency_ms=outcome["latency_ms"],
            error=(
                None if error is None else str(error) if isinstance(error, _SandboxRefused) else _describe(error)
            ),  # a refusal is its own sentence (confine.Posture.state)
            details=details,
        )

    return result


def readiness(*, timeout: float | None = None) -> Readiness:
    """Run every check concurrently, each bounded by `timeout` seconds."""
    timeout = timeout or timeout_seconds()
    checks: dict[str, Callable[[], Any]] = {
        "database": lambda: check_database(timeout=timeout),
        "broker": lambda: check_broker(timeout=timeout),
        "storage": lambda: check_storage(timeout=timeout),
        "scanner": lambda: check_scanners(timeout=timeout),
        "sandbox": check_sandbox,
        "uploads": check_uploads,
        "brakes": check_brakes,
    }
    waiting = {name: _run(name, check, timeout) for name, check in checks.items()}
    results = {name: wait() for name, wait in waiting.items()}
    report = Readiness(results)
    if not report.ok:
        log.warning(
            "not ready",
            extra={
                "step": "readyz",
                "outcome": "unavailable",
                "failed": {name: r.error for name, r in results.items() if not r.ok},
            },
        )
    return report
