"""Record what a rescan of a ready file found: clean (new signatures noted) or a hit (taken down).

A rescan never moves a file out of `ready` to look at it again: the file stays
served while its stored bytes are scanned (processing/rescan.py), and only a
hit changes its status, straight from ready to rejected.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from ..models import Attachment, Lifecycle, RescanCheckpoint, Status, TransitionLog
from ..reasons import ReasonCode
from .processing import attachment_quarantine
from .transitions import apply_transition, lock_attachment

RESCAN_ACTOR = "system:rescan"


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
