"""Readiness: can this process reach what a request or a job needs right now?

Five checks, each bounded by TIMEOUT_SECONDS and run
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

- workers: with a shared broker, some worker beat within three beats, or no file
  waits for one (processing/liveness.py);
- uploads: how many tenants' new uploads the backlog check refuses now
  (attachments/services/backlog.py), and which (named only to a caller that
  presents the metrics token: `Readiness.as_dict(named=True)`);
- brakes: the sweeper's killswitch or dry run, when on.

Every check reports ``{"ok", "latency_ms", "error"}``; one failed check makes
the whole answer "unavailable" (HTTP 503), and the body still lists them all.
A check that passes in a reduced mode says ``"state": "degraded: <reason>"``
(the sandbox with an accepted missing layer, paused uploads, an active brake):
still ready, HTTP 200, and every such reason is listed in the top-level
``"degraded"``.

Probes are cheap: `current_readiness()` computes at most once per
REUSE_SECONDS per process, in one thread at a time (single flight): a caller
that finds the last answer fresh gets it; one that finds it stale while another
thread computes gets that last answer too, and waits only before the process's
first answer (web processes compute it as they start: `warm_readiness`).
Thirty load balancers polling cost one set of checks a second, not thirty.
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
from prometheus_client import Counter

from processing.liveness import lost_after_seconds, registry

log = logging.getLogger("airlock.health")

# Sets of checks run (not requests answered): at most one a second per process.
CHECK_RUNS = Counter("airlock_readyz_computations_total", "Times /readyz ran its checks in this process.")

# Well inside an orchestrator's probe timeout (Kubernetes: 1 s by default per probe, retried),
# and long enough for a healthy dependency across a network.
TIMEOUT_SECONDS = 2.0
DEGRADED = "degraded: "
# How long one computed answer is given to every caller (tests set 0: every call computes).
REUSE_SECONDS = 1.0


@dataclass
class CheckResult:
    ok: bool
    latency_ms: float
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    named: dict[str, Any] = field(default_factory=dict)  # over `details` for a caller allowed tenant names

    def as_dict(self, *, named: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {"ok": self.ok, "latency_ms": self.latency_ms, "error": self.error}
        data.update(self.details)
        if named:
            data.update(self.named)
        return data


@dataclass
class Readiness:
    checks: dict[str, CheckResult]

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks.values())

    def degraded(self, *, named: bool = False) -> list[str]:
        """ "<check>: <reason>" for every passing check that runs in a reduced mode."""
        states = {name: str(check.as_dict(named=named).get("state", "")) for name, check in self.checks.items()}
        return [
            f"{name}: {states[name][len(DEGRADED) :]}"
            for name, check in self.checks.items()
            if check.ok and states[name].startswith(DEGRADED)
        ]

    def as_dict(self, *, named: bool = False) -> dict[str, Any]:
        """The probe's body; tenant names only when `named` (the caller presented the metrics token)."""
        return {
            "status": "ok" if self.ok else "unavailable",
            "degraded": self.degraded(named=named),
            "checks": {name: check.as_dict(named=named) for name, check in self.checks.items()},
        }


def timeout_seconds() -> float:
    return TIMEOUT_SECONDS


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


def check_workers() -> dict[str, Any]:
    """Some worker beat lately, or no work waits; fails when files wait and no worker consumes.

    Only with a shared broker: an in-process broker's worker is this process.
    """
    if broker_kind() == "stub":
        return {"state": "ok"}
    if registry().beating_within(lost_after_seconds()):
        return {"state": "ok"}
    from attachments.selectors import files_waiting_for_processing

    waiting = files_waiting_for_processing(older_than_seconds=lost_after_seconds())
    if waiting:
        raise RuntimeError(f"no worker is consuming ({waiting} files waiting); start or restart the workers")
    return {"state": "ok"}


def check_uploads() -> dict[str, Any]:
    """Tenants whose new uploads are paused by the backlog check: ready, but degraded.

    The public answer counts them; their names (and the sentences that name them)
    go under "named", shown only to a caller allowed to see them.
    """
    from attachments.notices import uploads_paused
    from attachments.services.backlog import paused_tenants

    paused = paused_tenants()
    if not paused:
        return {"state": "ok", "paused_tenant_count": 0, "named": {"paused_tenants": []}}
    count = len(paused)
    limit = paused[0]["max_backlog_seconds"]
    return {
        "state": f"{DEGRADED}New uploads are paused for {count} tenant{'' if count == 1 else 's'}: "
        f"uploaded files have waited for processing longer than {limit:g} s.",
        "paused_tenant_count": count,
        "named": {
            "state": DEGRADED + " ".join(notice.message for notice in uploads_paused()),
            "paused_tenants": [row["tenant"] for row in paused],
        },
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
            details = dict(value)
        named = details.pop("named", {})
        return CheckResult(
            ok=error is None,
            latency_ms=outcome["latency_ms"],
            error=(
                None if error is None else str(error) if isinstance(error, _SandboxRefused) else _describe(error)
            ),  # a refusal is its own sentence (confine.Posture.state)
            details=details,
            named=named,
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
        "workers": check_workers,
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


# --- one computation a second, one computing thread ---------------------------

_computing = threading.Lock()  # held by the one thread running the checks
_last: tuple[float, Readiness] | None = None  # (_now() when computed, report)
_now = time.monotonic  # the reuse window's clock (tests pass their own)


def forget_readiness() -> None:
    """Drop the remembered answer: the next call computes."""
    global _last
    _last = None


def current_readiness() -> Readiness:
    """The readiness of this process, computed at most once per REUSE_SECONDS, by one thread at a time.

    While one thread computes, the others answer the last report at once (the
    computing caller gets the new one, the next probes too); only before the first
    report of the process do they wait for it.
    """
    last = _last
    if last is not None and _now() - last[0] < REUSE_SECONDS:
        return last[1]
    if not _computing.acquire(blocking=False):
        if last is not None:
            return last[1]
        _computing.acquire()  # no report yet: wait for the thread computing the first
    try:
        return _compute_once()
    finally:
        _computing.release()


def warm_readiness() -> None:
    """Compute the first answer in the background (a web process that just started)."""
    threading.Thread(target=current_readiness, name="airlock-readyz-warm", daemon=True).start()


def _compute_once() -> Readiness:
    """Under _computing: the answer another thread just computed, if fresh, else a new one."""
    global _last
    last = _last
    if last is not None and _now() - last[0] < REUSE_SECONDS:
        return last[1]
    CHECK_RUNS.inc()
    report = readiness()
    _last = (_now(), report)
    return report
