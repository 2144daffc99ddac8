"""Dramatiq actors: receive an id, call one service. Retries are ours, not Dramatiq's.

Each stage (processing/stages.py: its name is its queue's and its actor's) has
its own queue (intake, which runs the scan, reads and checks the bytes; derive
is CPU-heavy), so one kind of backlog cannot starve the others; within each,
one tenant's backlog cannot starve other tenants (processing/fairness.py).
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import dramatiq

from attachments import jobs

from . import outages, pipeline
from .rescan.jobs import rescan_one
from .stages import DERIVE, INTAKE, SCAN, Stage

log = logging.getLogger("airlock.actors")

_OPTS: dict[str, Any] = {"max_retries": 0, "time_limit": 10 * 60 * 1000}


def _uuids(*raw: object) -> tuple[uuid.UUID, ...] | None:
    try:
        return tuple(uuid.UUID(str(value)) for value in raw)
    except (ValueError, TypeError, AttributeError):
        return None


def _dead_letter_message(actor: str, args: tuple) -> None:
    from attachments.models import DeadLetter
    from attachments.retention.services.dead_letters import dead_letter_open

    dead_letter_open(
        kind=DeadLetter.Kind.MESSAGE,
        last_error=f"malformed {actor} message",
        payload={"actor": actor, "args": [repr(a)[:200] for a in args]},
    )
    log.warning("malformed message dead-lettered", extra={"step": actor, "outcome": "dead_letter"})


def _tenant(raw: object) -> str | None:
    """A tenant id riding along a message: digits, or None when it is not one."""
    tenant = str(raw)
    return tenant if tenant.isascii() and tenant.isdigit() else None


def _subject(raw: object) -> str | None:
    """A subject riding along a message: any text (an account's name may be one); "" (a row without one): None."""
    return raw or None if isinstance(raw, str) else None


def _intake_args(args: tuple) -> tuple[uuid.UUID, str | None, str | None] | None:
    """(attachment id[, tenant id[, subject]]); messages sent before the tenant (or subject) rode along are shorter."""
    if not 1 <= len(args) <= 3:
        return None
    ids = _uuids(args[0])
    tenant = _tenant(args[1]) if len(args) >= 2 else None
    subject = _subject(args[2]) if len(args) == 3 else None
    if ids is None or (len(args) >= 2 and tenant is None) or (len(args) == 3 and not isinstance(args[2], str)):
        return None
    return ids[0], tenant, subject


def _stage_args(args: tuple) -> tuple[uuid.UUID, uuid.UUID, str | None, str | None] | None:
    """(attachment id, lease token[, tenant id[, subject]]); messages sent before they rode along are shorter."""
    if not 2 <= len(args) <= 4:
        return None
    ids = _uuids(*args[:2])
    tenant = _tenant(args[2]) if len(args) >= 3 else None
    subject = _subject(args[3]) if len(args) == 4 else None
    if ids is None or (len(args) >= 3 and tenant is None) or (len(args) == 4 and not isinstance(args[3], str)):
        return None
    return ids[0], ids[1], tenant, subject


# Each stage runs at most AIRLOCK_CONCURRENCY.tenant jobs of one tenant at once; the
# others wait parked off the queue and are sent again as slots free (fairness.py).
@dramatiq.actor(actor_name=INTAKE.actor_name, queue_name=INTAKE.queue, **_OPTS)
def intake(*args: object) -> None:
    """Start an attempt and run intake (size from storage, type from bytes, then every scanner)."""
    parsed = _intake_args(args)
    if parsed is None:
        return _dead_letter_message(intake.actor_name, args)
    # A database or Redis blip runs the job again here, not after the lease (outages.py).
    outages.run_through_blips(lambda: pipeline.intake_within_tenant_cap(*parsed, resend=intake.send), what="intake")


def _run_stage(actor: dramatiq.Actor, stage: Stage, args: tuple) -> None:
    parsed = _stage_args(args)
    if parsed is None:
        return _dead_letter_message(actor.actor_name, args)
    attachment_id, token, tenant, subject = parsed
    outages.run_through_blips(
        lambda: pipeline.stage_within_tenant_cap(attachment_id, token, stage.name, tenant, subject, resend=actor.send),
        what=stage.name,
    )


@dramatiq.actor(actor_name=SCAN.actor_name, queue_name=SCAN.queue, **_OPTS)
def scan(*args: object) -> None:
    """Scan the object with every configured scanner (fails closed): jobs sent before intake ran the scan."""
    _run_stage(scan, SCAN, args)


@dramatiq.actor(actor_name=DERIVE.actor_name, queue_name=DERIVE.queue, **_OPTS)
def derive(*args: object) -> None:
    """Decode in the sandbox and write derivatives; at most N at once per tenant."""
    _run_stage(derive, DERIVE, args)


@dramatiq.actor(actor_name=jobs.REDERIVE.actor_name, queue_name=jobs.REDERIVE.queue, **_OPTS)
def rederive(*args: object) -> None:
    """Make a ready file's missing derivatives again from its original (queued by reconcile)."""
    parsed = _uuids(*args) if len(args) == 1 else None
    if parsed is None:
        return _dead_letter_message(rederive.actor_name, args)
    outages.run_through_blips(lambda: pipeline.rederive(parsed[0]), what="rederive")


# Its own queue, and behind every upload's step in a worker's queue of fetched
# messages (a higher number runs later): a rescan never holds up a new upload.
@dramatiq.actor(actor_name=jobs.RESCAN.actor_name, queue_name=jobs.RESCAN.queue, priority=100, **_OPTS)
def rescan(*args: object) -> None:
    """Scan a ready file again; it stays ready unless the signatures in force find it."""
    parsed = _uuids(*args) if len(args) == 1 else None
    if parsed is None:
        return _dead_letter_message(rescan.actor_name, args)
    outages.run_through_blips(lambda: rescan_one(parsed[0]), what="rescan")
