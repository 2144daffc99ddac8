"""Notice that the broker lost its state (Redis restarted empty, or flushed) and rebuild the work from the database.

Every queued job, parked job, tenant slot and worker beat lives in Redis; the
database holds the files. A key that only this module writes, the broker's
epoch, lives beside them: when the scheduler's tick finds it gone, whatever was
queued is gone with it. The tick then sets a new epoch and sends every file
whose bytes arrived and that is not terminal a new job at once: a pending file
an intake job, a processing file its stage's job under its lease. Every job is
idempotent (the lease decides), so a file whose job survived after all is only
looked at twice. The first tick of a new deployment finds no epoch either: it
re-drives what is there, which costs the same and changes nothing.

With the in-process broker (embedded mode) there is no shared state to lose:
the check does nothing.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from attachments.models import Attachment, Lifecycle, Status
from attachments.services.processing import attachment_requeue_intake, attachment_stage_resend
from attachments.shared_redis import backend_redis

log = logging.getLogger("airlock.recovery")


def epoch_key() -> str:
    return f"{settings.AIRLOCK_KEY_PREFIX}-broker-epoch"


def broker_state_lost() -> bool:
    """True once per loss: the epoch was gone, and this caller set the new one."""
    if not settings.REDIS_URL:
        return False
    client = backend_redis()
    if client.exists(epoch_key()):
        return False
    return bool(client.set(epoch_key(), uuid.uuid4().hex, nx=True))


def redrive_after_broker_loss(*, now: datetime | None = None) -> int:
    """A new job for every file whose bytes arrived and that is not terminal; returns how many."""
    now = now or timezone.now()
    live = Attachment.objects.filter(uploaded_at__isnull=False).exclude(
        lifecycle__in=[Lifecycle.DISCARDED, Lifecycle.DELETED]
    )
    done = 0
    pending = live.filter(status=Status.PENDING, updated_at__lt=now).order_by("pk").values_list("pk", flat=True)
    for pk in list(pending):
        attachment_requeue_intake(attachment_id=pk, now=now)
        done += 1
    leased = live.filter(status=Status.PROCESSING, lease_token__isnull=False).order_by("pk")
    for pk, token, step, tenant_id, subject in list(
        leased.values_list("pk", "lease_token", "step", "tenant_id", "subject")
    ):
        done += attachment_stage_resend(attachment_id=pk, token=token, step=step, tenant_id=tenant_id, subject=subject)
    return done


def check_broker_epoch(*, now: datetime | None = None) -> int:
    """On the scheduler's tick: re-drive from the database when the broker lost its state; files re-driven."""
    try:
        lost = broker_state_lost()
    except Exception as exc:  # Redis is down now: the tick after it is back sees the loss
        log.warning("could not read the broker's epoch", extra={"error": str(exc)[:300]})
        return 0
    if not lost:
        return 0
    redriven = redrive_after_broker_loss(now=now)
    log.warning("the broker lost its state: files re-driven from the database", extra={"redriven": redriven})
    return redriven
