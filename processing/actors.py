"""Dramatiq actors: receive an id, call one service. Retries are ours, not Dramatiq's.

Each step has its own queue (intake and scan are cheap; derive is CPU-heavy
and capped per tenant), so one kind of backlog cannot starve the others.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import dramatiq

from . import pipeline
from .rescan import rescan_one

log = logging.getLogger("airlock.actors")

_OPTS: dict[str, Any] = {"max_retries": 0, "time_limit": 10 * 60 * 1000}


def _uuids(*raw: object) -> tuple[uuid.UUID, ...] | None:
    try:
        return tuple(uuid.UUID(str(value)) for value in raw)
    except (ValueError, TypeError, AttributeError):
        return None


def _dead_letter_message(actor: str, args: tuple) -> None:
    from attachments.models import DeadLetter

    DeadLetter.objects.create(kind=DeadLetter.Kind.MESSAGE, last_error=f"malformed {actor} message",
                              payload={"actor": actor, "args": [repr(a)[:200] for a in args]})
    log.warning("malformed message dead-lettered", extra={"step": actor, "outcome": "dead_letter"})


@dramatiq.actor(queue_name="intake", **_OPTS)
def intake(*args: object) -> None:
    """Start an attempt and run intake (size from storage, type from bytes)."""
    parsed = _uuids(*args) if len(args) == 1 else None
    if parsed is None:
        return _dead_letter_message("intake", args)
    pipeline.start_and_intake(parsed[0])


@dramatiq.actor(queue_name="scan", **_OPTS)
def scan(*args: object) -> None:
    """Scan the object with every configured scanner (fails closed)."""
    parsed = _uuids(*args) if len(args) == 2 else None
    if parsed is None:
        return _dead_letter_message("scan", args)
    pipeline.run_step(parsed[0], parsed[1], "scan")


def _derive_args(args: tuple) -> tuple[uuid.UUID, uuid.UUID, str | None] | None:
    """(attachment id, lease token[, tenant id]); messages sent before the tenant rode along have two."""
    if len(args) not in (2, 3):
        return None
    ids = _uuids(*args[:2])
    tenant = str(args[2]) if len(args) == 3 else None
    if ids is None or (tenant is not None and not (tenant.isascii() and tenant.isdigit())):
        return None
    return ids[0], ids[1], tenant


@dramatiq.actor(queue_name="derive", **_OPTS)
def derive(*args: object) -> None:
    """Decode in the sandbox and write derivatives; at most N at once per tenant."""
    parsed = _derive_args(args)
    if parsed is None:
        return _dead_letter_message("derive", args)
    pipeline.derive_within_tenant_cap(*parsed, resend=derive.send)


# Its own queue, and behind every upload's step in a worker's queue of fetched
# messages (a higher number runs later): a rescan never holds up a new upload.
@dramatiq.actor(queue_name="rescan", priority=100, **_OPTS)
def rescan(*args: object) -> None:
    """Scan a ready file again; it stays ready unless the signatures in force find it."""
    parsed = _uuids(*args) if len(args) == 1 else None
    if parsed is None:
        return _dead_letter_message("rescan", args)
    rescan_one(parsed[0])
