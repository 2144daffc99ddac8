"""Hard delete: rows soft-deleted longer ago than the audit window leave the database (each leaves a tombstone)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import QuerySet

from attachments.models import Attachment, Lifecycle
from attachments.retention.services.holds import not_held_q
from attachments.services.hard_delete import attachments_hard_delete

from .control import delete_brake

PURGE_ACTOR = "system:purge"


def purgeable(now: datetime) -> QuerySet[Attachment]:
    cutoff = now - timedelta(days=settings.AIRLOCK_RETENTION_DAYS.audit_window)
    # A hold placed after the delete (a ref's hold) keeps the row, the evidence of what was there.
    return Attachment.objects.filter(not_held_q(), lifecycle=Lifecycle.DELETED, deleted_at__lte=cutoff)


def purge_deleted(*, now: datetime, batch_size: int, limit: int | None = None, dry_run: bool = False) -> int:
    """Hard-delete soft-deleted rows past the audit window (their objects are already gone)."""
    if dry_run:
        count = purgeable(now).count()
        return count if limit is None else min(count, limit)
    total = 0
    while limit is None or total < limit:
        size = batch_size if limit is None else min(batch_size, limit - total)
        ids = list(purgeable(now).order_by("pk").values_list("pk", flat=True)[:size])
        if not ids:
            break
        total += attachments_hard_delete(rows=purgeable(now).filter(pk__in=ids), actor=PURGE_ACTOR, now=now)
        if len(ids) < size or delete_brake():  # a brake pulled mid-run holds the next batch
            break
    return total
