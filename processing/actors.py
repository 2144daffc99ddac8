"""Dramatiq actors: receive an id, call one service. Retries are ours, not Dramatiq's.

Each step has its own queue (intake and scan are cheap; derive is CPU-heavy
and capped per tenant), so one kind of backlog cannot starve the others.
"""

from __future__ import annotations

import logging
import random
import uuid

import dramatiq
from dramatiq.rate_limits import ConcurrentRateLimiter

from . import pipeline

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


def _tenant_limiter(attachment_id: uuid.UUID) -> ConcurrentRateLimiter | None:
    from django.conf import settings
    from django_dramatiq.apps import DjangoDramatiqConfig

    from attachments.models import Attachment

    tenant_id = Attachment.objects.filter(pk=attachment_id).values_list("tenant_id", flat=True).first()
    if tenant_id is None:
        return None
    return ConcurrentRateLimiter(
        DjangoDramatiqConfig.get_rate_limiter_backend(), f"{settings.AIRLOCK_KEY_PREFIX}-derive-tenant-{tenant_id}",
        limit=settings.AIRLOCK_TENANT_CONCURRENCY, ttl=int(settings.AIRLOCK_SANDBOX_WALL_SECONDS * 1000) + 60_000,
    )


@dramatiq.actor(queue_name="derive", **_OPTS)
def derive(*args: object) -> None:
    """Decode in the sandbox and write derivatives; at most N at once per tenant."""
    parsed = _uuids(*args) if len(args) == 2 else None
    if parsed is None:
        return _dead_letter_message("derive", args)
    limiter = _tenant_limiter(parsed[0])
    if limiter is None:
        return None
    with limiter.acquire(raise_on_failure=False) as acquired:
        if not acquired:
            # Another job of this tenant holds the slots: step aside to the back of
            # the queue so other tenants' files go first.
            derive.send_with_options(args=args, delay=200 + random.randint(0, 300))
            return None
        pipeline.run_step(parsed[0], parsed[1], "derive")
