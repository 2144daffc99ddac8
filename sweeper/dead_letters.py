"""Sweep dead letters: rows whose objects could not be deleted within the attempt cap wait for a human."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from attachments.models import Attachment, DeadLetter

from .reaping import REAPABLE


def sweep_dead_letter_retry(*, dead_letter_id: int, actor: str, now: datetime | None = None) -> bool:
    """A human fixed the cause: give the row its delete attempts back (next tick retries) and close the letter.

    Returns False when the letter is not an open sweep dead letter.
    """
    if not actor:
        raise ValueError("actor is required")
    now = now or timezone.now()
    with transaction.atomic():
        letter = DeadLetter.objects.select_for_update().filter(
            pk=dead_letter_id, kind=DeadLetter.Kind.SWEEP, resolved_at__isnull=True).first()
        if letter is None:
            return False
        if letter.attachment_id is not None:
            Attachment.objects.filter(pk=letter.attachment_id, lifecycle__in=REAPABLE).update(
                delete_attempts=0, delete_error="", updated_at=now)
        letter.resolved_at, letter.resolved_by = now, actor[:150]
        letter.history = [*letter.history, {"at": now.isoformat(), "by": actor, "action": "retry"}]
        letter.save(update_fields=["resolved_at", "resolved_by", "history"])
    return True
