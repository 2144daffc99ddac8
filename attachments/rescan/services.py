"""Record what a rescan of a ready file found: clean (new signatures noted) or a hit (taken down).

A rescan never moves a file out of `ready` to look at it again: the file stays
served while its stored bytes are scanned (processing/rescan/jobs.py), and only a
hit changes its status, straight from ready to rejected.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from .. import jobs
from ..models import Attachment, Lifecycle, RescanCheckpoint, Status, TransitionLog
from ..reasons import ReasonCode
from ..services import outbox
from ..services.processing import attachment_quarantine
from ..services.transitions import apply_transition, lock_attachment

log = logging.getLogger("airlock.rescan")

RESCAN_ACTOR = "system:rescan"
# A walk that reached its end starts over this long after, if files are still outdated
# (their rescan failed on a storage or scanner error): that is "retries later".
RESTART_AFTER = timedelta(minutes=10)
# Files uploaded and waiting longer than this hold the walk back (new uploads first).
UPLOADS_WAITING_SECONDS = 10.0


def rescan_checkpoint_locked() -> RescanCheckpoint:
    """The background rescan's one checkpoint row, made on first use, locked (call inside atomic())."""
    RescanCheckpoint.objects.get_or_create(pk=RescanCheckpoint.SINGLETON_PK)
    return RescanCheckpoint.objects.select_for_update().get(pk=RescanCheckpoint.SINGLETON_PK)


def rescan_candidates(version: str) -> QuerySet[Attachment]:
    """Ready files (not discarded or deleted) whose verdict is not from `version`, or that an operator flagged."""
    return (
        Attachment.objects.filter(status=Status.READY)
        .exclude(lifecycle__in=[Lifecycle.DISCARDED, Lifecycle.DELETED])
        .filter(~Q(scan_signatures=version) | Q(rescan_requested_at__isnull=False))
    )


def rescan_walk_advance(*, version: str, rate: int, now: datetime) -> int:
    """Queue the background walk's next files (rescan jobs) within `rate` a minute; return how many.

    The walk's checkpoint row says which signatures it walks for, where it stopped
    and how much of the rate budget is spent; it is locked for the whole step, so
    two schedulers never queue the same files.
    """
    with transaction.atomic():
        checkpoint = rescan_checkpoint_locked()
        if checkpoint.version != version:
            log.warning(
                "signatures changed: background rescan starts",
                extra={"step": "rescan", "from_version": checkpoint.version, "to_version": version},
            )
            _restart(checkpoint, now, version=version)
        elif checkpoint.finished_at is not None:
            if now - checkpoint.finished_at < RESTART_AFTER and not _requested_since(checkpoint.finished_at):
                return 0
            if not rescan_candidates(version).exists():
                checkpoint.finished_at = now
                checkpoint.save(update_fields=["finished_at"])
                return 0
            _restart(checkpoint, now, version=version)
        if _uploads_waiting(now):
            checkpoint.save()
            return 0
        # At most one minute's worth of budget accumulates, so a pause is not followed by a burst.
        budget_at = max(checkpoint.budget_at or now, now - timedelta(minutes=1))
        allowance = int(rate * (now - budget_at).total_seconds() / 60)
        if allowance < 1:
            checkpoint.budget_at = budget_at
            checkpoint.save()
            return 0
        candidates = rescan_candidates(version).order_by("-created_at", "-id")
        if checkpoint.cursor_created_at is not None:
            candidates = candidates.filter(
                Q(created_at__lt=checkpoint.cursor_created_at)
                | Q(created_at=checkpoint.cursor_created_at, id__lt=checkpoint.cursor_id)
            )
        picked = list(candidates.values_list("pk", "created_at")[:allowance])
        for pk, _ in picked:
            outbox.enqueue(jobs.RESCAN, pk)
        if picked:
            checkpoint.cursor_id, checkpoint.cursor_created_at = picked[-1]
            checkpoint.queued += len(picked)
        checkpoint.budget_at = budget_at + timedelta(seconds=60 * len(picked) / rate)
        if len(picked) < allowance:
            checkpoint.finished_at = now
            log.info("background rescan walk finished", extra={"step": "rescan", "queued": checkpoint.queued})
        checkpoint.save()
    return len(picked)


def _restart(checkpoint: RescanCheckpoint, now: datetime, *, version: str) -> None:
    checkpoint.version = version
    checkpoint.cursor_created_at = checkpoint.cursor_id = None
    checkpoint.queued = 0
    checkpoint.started_at, checkpoint.finished_at = now, None
    checkpoint.budget_at = checkpoint.budget_at or now


def _requested_since(when: datetime) -> bool:
    return Attachment.objects.filter(status=Status.READY, rescan_requested_at__gte=when).exists()


def _uploads_waiting(now: datetime) -> bool:
    """Files whose bytes arrived a while ago and are not ready yet: the walk waits for them."""
    return (
        Attachment.objects.filter(
            status__in=[Status.PENDING, Status.PROCESSING],
            attempts=0,
            uploaded_at__lt=now - timedelta(seconds=UPLOADS_WAITING_SECONDS),
        )
        .exclude(lifecycle__in=[Lifecycle.DISCARDED, Lifecycle.DELETED])
        .exists()
    )


def attachment_rescan_clean(*, attachment_id: uuid.UUID, signatures: str, now: datetime | None = None) -> bool:
    """A clean rescan: note the signatures and the time; nothing else changes (the file was ready throughout)."""
    now = now or timezone.now()
    with transaction.atomic():
        updated = Attachment.objects.filter(pk=attachment_id, status=Status.READY).update(
            scan_signatures=signatures[:300], scanned_at=now, rescan_requested_at=None, updated_at=now
        )
        if updated:
            TransitionLog.objects.create(
                attachment_id=attachment_id,
                transition="rescan",
                from_status=Status.READY,
                to_status=Status.READY,
                actor=RESCAN_ACTOR,
                message=f"rescanned clean with {signatures}"[:500],
            )
    return bool(updated)


def attachment_rescan_reject(
    *, attachment_id: uuid.UUID, signatures: str, message: str, now: datetime | None = None
) -> bool:
    """A ready file that the signatures in force find: rejected/malware, quarantined, announced.

    The audit row names the rescan and the signatures; the `rejected` outcome
    sends the attachment.rejected webhook in the same transaction.
    """
    now = now or timezone.now()
    with transaction.atomic():
        attachment = lock_attachment(attachment_id)
        if attachment is None or attachment.status != Status.READY:
            return False
        apply_transition(
            attachment,
            "reject_on_rescan",
            actor=RESCAN_ACTOR,
            note=f"rescan with {signatures}: {message}",
            code=ReasonCode.MALWARE,
            message=message,
            signatures=signatures,
            now=now,
        )
    attachment_quarantine(attachment_id=attachment_id)
    return True


def attachments_request_rescan(*, queryset: QuerySet[Attachment], now: datetime | None = None) -> int:
    """Flag ready files for a rescan whatever their signatures (the background walk picks them up)."""
    now = now or timezone.now()
    with transaction.atomic():
        flagged = queryset.filter(status=Status.READY).update(rescan_requested_at=now)
        if flagged:  # the walk starts over from the newest file at its next tick
            RescanCheckpoint.objects.filter(pk=RescanCheckpoint.SINGLETON_PK).update(
                cursor_created_at=None, cursor_id=None, finished_at=None
            )
    return flagged
