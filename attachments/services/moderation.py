"""What staff do to an attachment: requeue, rescan, take down, restore."""

from __future__ import annotations

import uuid

from django.db import transaction
from django.utils import timezone

from ..errors import NotFound
from ..models import DeadLetter, Status
from . import outbox
from .transitions import TransitionConflict, apply_transition, lock_attachment


def _locked(attachment_id: uuid.UUID | str):
    attachment = lock_attachment(attachment_id)
    if attachment is None:
        raise NotFound()
    return attachment


def _resolve_dead_letters(attachment, actor: str) -> None:
    DeadLetter.objects.filter(attachment=attachment, resolved_at__isnull=True).update(
        resolved_at=timezone.now(), resolved_by=actor[:150])


def attachment_requeue(*, attachment_id: uuid.UUID | str, actor: str) -> None:
    """failed (dead-lettered) or stuck processing → pending with fresh attempts, enqueued."""
    with transaction.atomic():
        attachment = _locked(attachment_id)
        if attachment.status not in (Status.FAILED, Status.PROCESSING):
            raise TransitionConflict(f"cannot requeue an attachment that is {attachment.status}")
        apply_transition(attachment, "retry", actor=actor, note="requeued by staff", reset_attempts=True)
        _resolve_dead_letters(attachment, actor)
        outbox.enqueue("intake", attachment.pk, attachment.tenant_id)


def attachment_rescan(*, attachment_id: uuid.UUID | str, actor: str) -> None:
    """ready → pending: run the whole pipeline again (new signatures, new derivatives)."""
    with transaction.atomic():
        attachment = _locked(attachment_id)
        apply_transition(attachment, "rescan", actor=actor, note="rescan requested")
        outbox.enqueue("intake", attachment.pk, attachment.tenant_id)


def attachment_take_down(*, attachment_id: uuid.UUID | str, actor: str, note: str) -> None:
    """→ rejected/moderator: the serving path stops serving it at once."""
    with transaction.atomic():
        attachment = _locked(attachment_id)
        apply_transition(attachment, "take_down", actor=actor, message=note or "taken down by a moderator")


def attachment_restore(*, attachment_id: uuid.UUID | str, actor: str) -> None:
    """Undo a moderator takedown: back through the pipeline before anything is served."""
    with transaction.atomic():
        attachment = _locked(attachment_id)
        apply_transition(attachment, "restore", actor=actor, note="takedown restored")
        outbox.enqueue("intake", attachment.pk, attachment.tenant_id)


def dead_letter_resolve(*, dead_letter_id: int, actor: str) -> None:
    DeadLetter.objects.filter(pk=dead_letter_id, resolved_at__isnull=True).update(
        resolved_at=timezone.now(), resolved_by=actor[:150])
