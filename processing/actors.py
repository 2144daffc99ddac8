"""Dramatiq actors: receive an id, call one service. Retries are ours, not Dramatiq's.

Each step has its own queue (intake and scan are cheap; derive is CPU-heavy
and capped per tenant), so one kind of backlog cannot starve the others.
"""

from __future__ import annotations

import logging
import uuid

import dramatiq

from . import pipeline, tenant_slots

log = logging.getLogger("airlock.actors")

_OPTS = {"max_retries": 0, "time_limit": 10 * 60 * 1000}


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


def _tenant_of(attachment_id: uuid.UUID) -> int | None:
    from attachments.models import Attachment

    return Attachment.objects.filter(pk=attachment_id).values_list("tenant_id", flat=True).first()


@dramatiq.actor(queue_name="derive", **_OPTS)
def derive(*args: object) -> None:
    """Decode in the sandbox and write derivatives; at most N at once per tenant."""
    from django.conf import settings

    parsed = _uuids(*args) if len(args) == 2 else None
    if parsed is None:
        return _dead_letter_message("derive", args)
    tenant_id = _tenant_of(parsed[0])
    if tenant_id is None:
        return None
    slots = tenant_slots.backend()
    tenant, holder = str(tenant_id), tenant_slots.holder_name(parsed[0])
    ttl_ms = int(settings.AIRLOCK_SANDBOX_WALL_SECONDS * 1000) + 60_000
    if not slots.acquire_or_park(tenant, holder, tenant_slots.encode(parsed), limit=settings.AIRLOCK_TENANT_CONCURRENCY,
                                 ttl_ms=ttl_ms, park_ttl_ms=settings.AIRLOCK_LEASE_SECONDS * 1000):
        return None  # parked: sent again as soon as one of this tenant's jobs finishes
    try:
        pipeline.run_step(parsed[0], parsed[1], "derive")
    finally:
        _send_next_parked(slots, tenant, holder)


def _send_next_parked(slots: tenant_slots.SlotsBackend, tenant: str, holder: str) -> None:
    parked = slots.release(tenant, holder)
    args = tenant_slots.decode(parked) if parked else None
    if args is None:
        return
    try:
        derive.send(*args)  # to the back of the queue: other tenants' jobs already waiting go first
    except Exception as exc:  # the broker is down: the lease reconciler re-drives the file
        log.warning("could not resend a parked derive job", extra={"step": "derive", "error": str(exc)})
