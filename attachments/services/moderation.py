"""What staff do to an attachment: requeue, rescan, take down, restore."""

from __future__ import annotations

import uuid

from django.db import transaction
from django.utils import timezone

from .. import jobs
from ..errors import NotFound
from ..models import DeadLetter, Status, TransitionLog
from ..retention.services.dead_letters import dead_letters_answered
from ..variants.services.purge import ForgottenVariants, variants_forget
from . import outbox
from .audit import VARIANTS_PURGED, audit_entry
from .renditions import rendition_requeue
from .transitions import TransitionConflict, apply_transition, lock_attachment


def _locked(attachment_id: uuid.UUID | str):
    attachment = lock_attachment(attachment_id)
    if attachment is None:
        raise NotFound()
    return attachment


def attachment_requeue(*, attachment_id: uuid.UUID | str, actor: str) -> None:
    """failed (dead-lettered) or stuck processing → pending with fresh attempts, enqueued."""
    with transaction.atomic():
        attachment = _locked(attachment_id)
        if attachment.status not in (Status.FAILED, Status.PROCESSING):
            raise TransitionConflict(f"cannot requeue an attachment that is {attachment.status}")
        apply_transition(attachment, "retry", actor=actor, note="requeued by staff", reset_attempts=True)
        dead_letters_answered([attachment.pk], actor=actor)
        outbox.enqueue(jobs.INTAKE, attachment.pk, attachment.tenant_id, attachment.subject)


def dead_letter_requeue(*, letter: DeadLetter, actor: str) -> None:
    """Staff: try again what the dead letter gave up on, and resolve it.

    A rendition dead letter is a ready video whose web rendition gave up: the
    rendition is made again and the file stays served. Any other is the file's
    processing: back to pending with fresh attempts.
    """
    if letter.attachment_id is None:
        raise ValueError("no attachment to requeue (resolve it instead)")
    if letter.kind == DeadLetter.Kind.SWEEP:
        raise ValueError("a sweep dead letter is about deleting objects: retry the delete instead")
    if letter.kind == DeadLetter.Kind.RENDITION:
        if not rendition_requeue(attachment_id=letter.attachment_id, actor=actor):
            raise ValueError("its rendition is not failed (made or requeued since), or the file is no longer served")
    else:
        attachment_requeue(attachment_id=letter.attachment_id, actor=actor)
    dead_letter_resolve(dead_letter_id=letter.pk, actor=actor)  # this one too, whatever its kind


def attachment_rescan(*, attachment_id: uuid.UUID | str, actor: str) -> None:
    """Scan a ready file again now, with the signatures in force; it stays ready and served meanwhile.

    Only a hit takes it down (processing/rescan/jobs.py); the job goes out at once,
    not at the background walk's pace.
    """
    with transaction.atomic():
        attachment = _locked(attachment_id)
        if attachment.status != Status.READY:
            raise TransitionConflict(f"cannot rescan an attachment that is {attachment.status}")
        now = timezone.now()
        type(attachment).objects.filter(pk=attachment.pk).update(rescan_requested_at=now, updated_at=now)
        TransitionLog.objects.create(
            attachment=attachment,
            transition="rescan",
            from_status=Status.READY,
            to_status=Status.READY,
            actor=actor[:150],
            message="rescan requested (the file stays served)",
        )
        outbox.enqueue(jobs.RESCAN, attachment.pk)


def attachment_reprocess(*, attachment_id: uuid.UUID | str, actor: str) -> None:
    """ready → pending: run the whole pipeline again (a new derivative recipe); not served until ready again."""
    with transaction.atomic():
        attachment = _locked(attachment_id)
        apply_transition(attachment, "rescan", actor=actor, note="reprocess requested")
        outbox.enqueue(jobs.INTAKE, attachment.pk, attachment.tenant_id, attachment.subject)


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
        outbox.enqueue(jobs.INTAKE, attachment.pk, attachment.tenant_id, attachment.subject)


def dead_letter_resolve(*, dead_letter_id: int, actor: str) -> None:
    DeadLetter.objects.filter(pk=dead_letter_id, resolved_at__isnull=True).update(
        resolved_at=timezone.now(), resolved_by=actor[:150]
    )


def attachment_variants_purge(*, attachment_id: uuid.UUID, actor: str) -> ForgottenVariants:
    """Staff drop a file's variants (the next request makes them again); audited on the file's timeline."""
    with transaction.atomic():
        attachment = lock_attachment(attachment_id)
        if attachment is None:
            return ForgottenVariants(0, 0)
        forgotten = variants_forget(attachment.pk)
        audit_entry(
            attachment.pk,
            event=VARIANTS_PURGED,
            actor=actor,
            details={"variants": forgotten.count, "bytes": forgotten.bytes, "kept": forgotten.kept},
            message=f"{forgotten.count} variant(s) purged",
        ).save()
    return forgotten
