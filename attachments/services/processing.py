"""Move an attachment through processing: begin, advance, reject, retry or fail, release, quarantine.

The pipeline (processing/) runs the steps and calls these to record what they
found. Every function re-locks the row and checks the lease token, so a
duplicate or stale job (one whose attempt was superseded) changes nothing.
"""

from __future__ import annotations

import functools
import logging
import random
import uuid
from datetime import datetime, timedelta
from typing import Any, TypeGuard

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from .. import jobs, renditions
from ..facts import FileFacts
from ..models import Attachment, DeadLetter, Lifecycle, Status, TransitionLog
from ..naming import quarantine_key
from ..profiles import get_profile
from ..reasons import ReasonCode
from ..retention.services.dead_letters import dead_letter_open, dead_letters_answered
from ..storage import get_gateway
from ..storage.base import move
from . import outbox, quotas
from .audit import WAIT_NOTE_PREFIX, dependency_waits_fold, stage_entry
from .derivatives import derivatives_upsert
from .duplicates import duplicate_twin, duplicate_twin_in_update
from .transitions import apply_transition, apply_transition_unlocked, lock_attachment, save_fields

log = logging.getLogger("airlock.pipeline")

WORKER = "worker"

# How often a file waiting for a dependency tries again (±50 %, processing/outages.py): short
# enough that it is ready well within a minute of the dependency's return, long enough to stay cheap.
DEPENDENCY_WAIT_SECONDS = 10.0


def _lease_deadline(now: datetime) -> datetime:
    return now + timedelta(seconds=settings.AIRLOCK_RETRIES.lease_seconds)


def _locked_if_current(attachment_id: uuid.UUID, token: uuid.UUID | None, step: str | None = None) -> Attachment | None:
    attachment = lock_attachment(attachment_id)
    if attachment is None or attachment.status != Status.PROCESSING or attachment.lease_token != token:
        return None
    if step is not None and attachment.step != step:
        return None
    return attachment


def attachment_is_startable(attachment: Attachment | None) -> TypeGuard[Attachment]:
    """Pending with its bytes in, and neither discarded nor deleted."""
    return (
        attachment is not None
        and attachment.status == Status.PENDING
        and attachment.uploaded_at is not None
        and attachment.lifecycle not in (Lifecycle.DISCARDED, Lifecycle.DELETED)
    )


def facts_columns(facts: FileFacts) -> dict[str, Any]:
    """The Attachment columns the pipeline's facts set, one by one; a fact not found sets nothing."""
    columns = {
        "stored_size": facts.stored_size,
        "content_type": facts.content_type,
        "scan_signatures": facts.scan_signatures,
        "scanned_at": facts.scanned_at,
        "served_key": facts.served_key,
        "size": facts.size,
        "sha256": facts.sha256,
        "text": facts.text,
        "metadata": facts.metadata,
    }
    return {name: value for name, value in columns.items() if value is not None}


def _stage_entries(attachment: Attachment, *, step: str, fields: dict[str, Any]) -> list[Any]:
    """The unsaved audit rows of a stage's facts: intake's arrival, and its scan's when intake ran the scan."""
    stages = [step, "scan"] if step == "intake" and fields.get("scanned_at") else [step]
    entries = [stage_entry(attachment, stage=name, fields=fields, actor=WORKER) for name in stages]
    return [entry for entry in entries if entry is not None]


def attachment_begin(
    *,
    attachment_id: uuid.UUID,
    now: datetime | None = None,
    intake_facts: FileFacts | None = None,
    next_step: str = "derive",
    read: Attachment | None = None,
) -> uuid.UUID | None:
    """pending → processing with a fresh lease; None when there is nothing to do.

    With `intake_facts` (intake, with its scan, already done outside the lease,
    because it only read write-once bytes) the facts are recorded and `next_step`
    is queued in the same transaction: one commit for everything up to derive.

    `read` is the row as the caller read it (unlocked, Attachment.objects.for_step()):
    when it was startable, the start is one UPDATE that re-checks what made it so,
    with no lock read; a row that moved on since takes the locked path.
    """
    now = now or timezone.now()
    fields = facts_columns(intake_facts) if intake_facts is not None else None
    token = uuid.uuid4()
    with transaction.atomic():
        attachment = None
        if attachment_is_startable(read):
            attachment = _start(read, token=token, fields=fields, next_step=next_step, now=now, guarded=True)
        if attachment is None:
            locked = lock_attachment(attachment_id)
            if not attachment_is_startable(locked):
                return None
            attachment = _start(locked, token=token, fields=fields, next_step=next_step, now=now, guarded=False)
        if attachment is not None and intake_facts is not None:
            outbox.enqueue(jobs.of_step(next_step), attachment.pk, token, attachment.tenant_id, attachment.subject)
        return token


def _start(
    attachment: Attachment,
    *,
    token: uuid.UUID,
    fields: dict[str, Any] | None,
    next_step: str,
    now: datetime,
    guarded: bool,
) -> Attachment | None:
    """The start transition on a locked row, or (`guarded`) on an unlocked read of a startable row.

    Guarded, the UPDATE re-checks attachment_is_startable: pending (with the usage
    columns, the lifecycle among them, as read: neither discarded nor deleted) and uploaded.
    """
    # The bytes' facts go on the timeline before the start they led to, in the same INSERT.
    arrived = _stage_entries(attachment, step="intake", fields=fields) if fields is not None else []
    given: dict[str, Any] = {
        "actor": WORKER,
        "lease_token": token,
        "lease_expires_at": _lease_deadline(now),
        "step": "intake" if fields is None else next_step,
        "fields": fields,
        "audit": arrived,
    }
    if guarded:
        return apply_transition_unlocked(attachment, "start", guard={"uploaded_at__isnull": False}, **given)
    return apply_transition(attachment, "start", **given)


def attachment_lease_extend(*, attachment_id: uuid.UUID, token: uuid.UUID, now: datetime | None = None) -> bool:
    """Renew a lease whose job is known to be waiting, not lost (parked behind its tenant's cap)."""
    return bool(
        Attachment.objects.filter(pk=attachment_id, status=Status.PROCESSING, lease_token=token).update(
            lease_expires_at=_lease_deadline(now or timezone.now())
        )
    )


def attachment_snapshot_record(*, attachment_id: uuid.UUID, token: uuid.UUID, content_key: str) -> bool:
    """Point the row at the server-only copy of its upload, if this lease is still the row's."""
    return bool(Attachment.objects.filter(pk=attachment_id, lease_token=token).update(content_key=content_key))


def attachment_advance(
    *,
    attachment_id: uuid.UUID,
    token: uuid.UUID,
    step: str,
    facts: FileFacts,
    next_step: str | None,
    derivatives: list[dict[str, Any]] | None = None,
    now: datetime | None = None,
    read: Attachment | None = None,
) -> bool:
    """Record a stage's facts and hand over to the next stage, or flip to ready.

    `read` is the row as the stage read it before its work (unlocked). A plain
    hand-over (no derivatives, no usage column among the facts) is then one
    UPDATE guarded by the lease instead of a locked read and a save; a row that
    moved on takes the locked path below, which decides what it means.
    """
    now = now or timezone.now()
    fields = facts_columns(facts)
    with transaction.atomic():
        if (
            read is not None
            and next_step is not None
            and not derivatives
            and not set(fields) & set(quotas.USAGE_FIELDS)
            and _hand_over(read, token=token, step=step, fields=fields, next_step=next_step, now=now)
        ):
            return True
        if (
            read is not None
            and next_step is None
            and read.lifecycle not in (Lifecycle.DISCARDED, Lifecycle.DELETED)
            and _finish(read, token=token, step=step, fields=fields, derivatives=derivatives, now=now)
        ):
            return True
        attachment = _locked_if_current(attachment_id, token, step)
        if attachment is None:
            return False
        if attachment.lifecycle in (Lifecycle.DISCARDED, Lifecycle.DELETED):
            # Discarded (or already swept) while this job held it: no derivative rows,
            # no flip; its objects are the sweeper's (and reconcile's) to remove.
            attachment_reject_missing(
                attachment=attachment, actor=WORKER, message="Discarded while it was being processed."
            )
            return False
        # A retried attempt (or a rescan) replaces what an earlier one wrote.
        derivatives_upsert(attachment, derivatives)
        entries = _stage_entries(attachment, step=step, fields=fields)  # bytes arrived, a scan
        if next_step is None:
            twin = duplicate_twin(attachment=attachment, sha256=fields.get("sha256") or attachment.sha256, now=now)
            if twin is not None and get_profile(attachment.profile).rejects_duplicates:
                apply_transition(
                    attachment,
                    "reject",
                    actor=WORKER,
                    code=ReasonCode.DUPLICATE,
                    message=f"The same bytes as {twin}, already available.",
                    fields=fields,
                    audit=entries,
                )
                transaction.on_commit(lambda: attachment_quarantine(attachment_id=attachment_id))
                return True
            fields["duplicate_of"] = twin
            # The audit row says which signatures found it clean (the scan step recorded them).
            signatures = fields.get("scan_signatures") or attachment.scan_signatures
            apply_transition(
                attachment,
                "finish",
                actor=WORKER,
                now=now,
                fields=fields,
                note=f"scanned clean with {signatures}" if signatures else "",
                audit=entries,
            )
            if renditions.web_state(attachment.metadata) is not None:
                # A video: after ready, its own queue drops the original (the copy is durable now)
                # and makes its web rendition where one is needed (services/renditions.py).
                outbox.enqueue(jobs.TRANSCODE, attachment.pk, attachment.tenant_id)
        else:
            if entries:
                TransitionLog.objects.bulk_create(entries)
            usage_before = quotas.usage_snapshot(attachment)
            for name, value in {**fields, "step": next_step, "lease_expires_at": _lease_deadline(now)}.items():
                setattr(attachment, name, value)
            save_fields(attachment, [*fields, "step", "lease_expires_at"], usage_before=usage_before)
            # The job carries its tenant: the actor parks a job over the tenant's
            # cap without reading the row first (processing/fairness.py).
            outbox.enqueue(jobs.of_step(next_step), attachment.pk, token, attachment.tenant_id, attachment.subject)
    return True


def _finish(
    read: Attachment,
    *,
    token: uuid.UUID,
    step: str,
    fields: dict[str, Any],
    derivatives: list[dict[str, Any]] | None,
    now: datetime,
) -> bool:
    """The last stage's flip (to ready, or rejected as a duplicate) from the row the stage read; False if it moved on.

    The same decisions as the locked path in attachment_advance, taken on the
    read: its transition's UPDATE re-checks the lease, the stage, the usage
    columns (the lifecycle among them: not discarded) and the ref the duplicate
    rule looked in, so no lock read is needed. The derivative rows are written
    only once that UPDATE has matched (a stale job writes none).
    """
    guard = {"lease_token": token, "step": step, "ref": read.ref}
    entries = _stage_entries(read, step=step, fields=fields)
    keep = functools.partial(derivatives_upsert, records=derivatives)
    sha256 = fields.get("sha256") or read.sha256
    twin: uuid.UUID | None = None
    flag: Any  # the twin, or the subquery that decides it
    if not get_profile(read.profile).rejects_duplicates:
        # Only flagged, never rejected: the flip's UPDATE looks the twin up itself, with no read before it.
        flag = duplicate_twin_in_update(attachment=read, sha256=sha256, now=now)
    else:
        twin = flag = duplicate_twin(attachment=read, sha256=sha256, now=now)
    if twin is not None:
        rejected = apply_transition_unlocked(
            read,
            "reject",
            guard=guard,
            actor=WORKER,
            code=ReasonCode.DUPLICATE,
            message=f"The same bytes as {twin}, already available.",
            fields=fields,
            audit=entries,
            before_record=keep,
        )
        if rejected is None:
            return False
        transaction.on_commit(lambda: attachment_quarantine(attachment_id=read.pk))
        return True
    signatures = fields.get("scan_signatures") or read.scan_signatures
    finished = apply_transition_unlocked(
        read,
        "finish",
        guard=guard,
        actor=WORKER,
        now=now,
        fields={**fields, "duplicate_of": flag},
        note=f"scanned clean with {signatures}" if signatures else "",
        audit=entries,
        before_record=keep,
    )
    if finished is None:
        return False
    if renditions.web_state(finished.metadata) is not None:
        outbox.enqueue(jobs.TRANSCODE, finished.pk, finished.tenant_id)  # as the locked path does, below
    return True


def _hand_over(
    read: Attachment, *, token: uuid.UUID, step: str, fields: dict[str, Any], next_step: str, now: datetime
) -> bool:
    """Move a row still leased by `token` at `step`, and not discarded, on to `next_step`; False if it moved on.

    The WHERE clause is _locked_if_current's check, made by the UPDATE itself
    (PostgreSQL re-checks it on the newest row version), so no lock read is needed.
    """
    updated = (
        Attachment.objects.filter(pk=read.pk, status=Status.PROCESSING, lease_token=token, step=step)
        .exclude(lifecycle__in=(Lifecycle.DISCARDED, Lifecycle.DELETED))
        .update(**fields, step=next_step, lease_expires_at=_lease_deadline(now), updated_at=timezone.now())
    )
    if not updated:
        return False
    entries = _stage_entries(read, step=step, fields=fields)
    if entries:
        TransitionLog.objects.bulk_create(entries)
    outbox.enqueue(jobs.of_step(next_step), read.pk, token, read.tenant_id, read.subject)
    return True


def attachment_reject(
    *, attachment_id: uuid.UUID, token: uuid.UUID | None, code: ReasonCode | str, message: str
) -> bool:
    """A content decision: terminal, never retried; the object goes to quarantine."""
    with transaction.atomic():
        attachment = _locked_if_current(attachment_id, token)
        if attachment is None:
            return False
        apply_transition(attachment, "reject", actor=WORKER, code=code, message=message)
    if code != ReasonCode.OBJECT_MISSING:
        attachment_quarantine(attachment_id=attachment_id)
    return True


def attachment_reject_missing(*, attachment: Attachment, actor: str, message: str) -> None:
    """Reject a row the caller locked whose bytes are gone (removed, never uploaded, discarded)."""
    apply_transition(attachment, "reject", actor=actor, code=ReasonCode.OBJECT_MISSING, message=message)


def attachment_retry_or_fail(
    *, attachment_id: uuid.UUID, token: uuid.UUID | None, error: str, actor: str = WORKER, backoff: bool = True
) -> str | None:
    """Infrastructure trouble: back to pending with backoff, or failed + dead letter at the cap.

    Without `backoff` the new job goes out at once: a lease that ran out already
    waited, and a lost worker is no dependency that needs time to come back.
    """
    with transaction.atomic():
        attachment = _locked_if_current(attachment_id, token)
        if attachment is None:
            return None
        if attachment.attempts + 1 >= settings.AIRLOCK_RETRIES.max_attempts:
            apply_transition(attachment, "fail", actor=actor, message=error)
            dead_letter_open(
                kind=DeadLetter.Kind.PROCESSING,
                attachment=attachment,
                storage_key=attachment.storage_key,
                last_error=error,
                history=attempt_history(attachment) + [{"attempt": attachment.attempts + 1, "error": error[:500]}],
            )
            return "failed"
        apply_transition(attachment, "retry", actor=actor, note=error)
        delay = backoff_seconds(attachment.attempts) if backoff else 0.0
        outbox.enqueue(jobs.INTAKE, attachment.pk, attachment.tenant_id, attachment.subject, delay_ms=int(delay * 1000))
        return "retried"


def attachment_wait_for_dependency(
    *, attachment_id: uuid.UUID, token: uuid.UUID | None, error: str, delay_seconds: float
) -> bool:
    """A dependency the stage needs is down: back to pending, no attempt counted, tried again after the delay.

    The file is not the problem, so its attempts are kept for failures against
    healthy dependencies (processing/outages.py decides which is which), and the
    hand-back is noted (`dependency_wait_at`) so that the wait is not counted as
    its tenant's backlog (services/backlog.py).
    """
    with transaction.atomic():
        attachment = _locked_if_current(attachment_id, token)
        if attachment is None:
            return False
        apply_transition(
            attachment,
            "release",
            actor=WORKER,
            note=f"{WAIT_NOTE_PREFIX}{error}"[:500],
            fields={"dependency_wait_at": timezone.now()},
            details=dependency_waits_fold(attachment.pk),
        )
        outbox.enqueue(
            jobs.INTAKE, attachment.pk, attachment.tenant_id, attachment.subject, delay_ms=int(delay_seconds * 1000)
        )
    return True


def attachment_release(*, attachment_id: uuid.UUID, token: uuid.UUID | None, actor: str = WORKER) -> bool:
    """Hand a lease back (the worker is stopping): pending at once, a new intake job queued.

    No attempt is counted; the running step, if it ever finishes, finds its
    lease gone and changes nothing.
    """
    with transaction.atomic():
        attachment = _locked_if_current(attachment_id, token)
        if attachment is None:
            return False
        apply_transition(attachment, "release", actor=actor, note="worker stopping")
        outbox.enqueue(jobs.INTAKE, attachment.pk, attachment.tenant_id, attachment.subject)
    return True


def attachment_requeue_intake(*, attachment_id: uuid.UUID, now: datetime, delay_ms: int = 0) -> None:
    """A new intake job for a pending row whose bytes arrived but whose job went missing.

    The row is touched so the next reconcile tick does not re-drive it again at once.
    """
    with transaction.atomic():
        Attachment.objects.filter(pk=attachment_id).update(updated_at=now)
        outbox.enqueue(jobs.INTAKE, attachment_id, delay_ms=delay_ms)


def attachment_stage_resend(
    *, attachment_id: uuid.UUID, token: uuid.UUID, step: str, tenant_id: int, subject: str | None = None
) -> bool:
    """Send a processing file's current stage job again (the broker lost it), its lease renewed; the lease decides."""
    with transaction.atomic():
        renewed = Attachment.objects.filter(
            pk=attachment_id, status=Status.PROCESSING, lease_token=token, step=step
        ).update(lease_expires_at=_lease_deadline(timezone.now()))
        if not renewed or not step:
            return False
        outbox.enqueue(jobs.of_step(step), attachment_id, token, tenant_id, *([] if subject is None else [subject]))
    return True


def attachments_touch_parked(*, attachment_ids: list[uuid.UUID], now: datetime) -> int:
    """Pending rows whose intake job is parked behind their tenant's cap, or runs before its lease: waiting, not lost.

    Touching them moves them out of the reconcile tick's "job went missing" window,
    so they are looked at again later instead of being sent a second job.
    """
    if not attachment_ids:
        return 0
    return Attachment.objects.filter(pk__in=attachment_ids).update(updated_at=now)


def backoff_seconds(attempts: int) -> float:
    """Exponential backoff with ±50 % jitter: uniform in [0.5, 1.5) of the nominal delay."""
    nominal = min(
        settings.AIRLOCK_RETRIES.max_seconds, settings.AIRLOCK_RETRIES.base_seconds * (2 ** max(0, attempts - 1))
    )
    return nominal * (0.5 + random.random())


def attempt_history(attachment: Attachment) -> list[dict[str, Any]]:
    rows = TransitionLog.objects.filter(attachment=attachment, transition="retry").order_by("created_at", "id")
    return [{"attempt": i + 1, "at": row.created_at.isoformat(), "error": row.message} for i, row in enumerate(rows)]


def attachment_quarantine(*, attachment_id: uuid.UUID) -> None:
    """Move a rejected original under quarantine/ so support can still look at it."""
    attachment = Attachment.objects.filter(pk=attachment_id, status=Status.REJECTED).first()
    if attachment is None or attachment.quarantine_key:
        return
    gateway = get_gateway()
    target = quarantine_key(attachment.storage_key)
    try:
        if gateway.head(attachment.working_key) is None:
            return
        move(gateway, attachment.working_key, target)
    except Exception as exc:  # the sweeper deletes by both keys, nothing is lost
        log.warning("quarantine move failed", extra={"attachment_id": str(attachment_id), "error": str(exc)})
        return
    Attachment.objects.filter(pk=attachment_id).update(quarantine_key=target)


# How a file that processing already finished goes back to pending to be processed again.
REPROCESS_TRANSITIONS: dict[str, str] = {Status.READY: "rescan", Status.FAILED: "retry"}


def attachments_reprocess(*, ids: list[uuid.UUID], status: str, actor: str, note: str) -> int:
    """Send files that are still `status` back through processing (ready: rescan; failed: retry); return how many.

    Rows are locked in primary-key order; one that moved on since it was selected
    is skipped. Each one's intake job goes out through the outbox in the same
    transaction (the caller's, when it has one: a backfill commits its checkpoint with it).
    """
    name = REPROCESS_TRANSITIONS[status]
    moved = []
    with transaction.atomic():
        for attachment in Attachment.objects.select_for_update().filter(pk__in=ids, status=status).order_by("pk"):
            apply_transition(attachment, name, actor=actor, note=note)
            outbox.enqueue(jobs.INTAKE, attachment.pk, attachment.tenant_id, attachment.subject)
            moved.append(attachment.pk)
        if status == Status.FAILED:  # retried as staff's requeue retries it: its dead letters are answered
            dead_letters_answered(moved, actor=actor)
    return len(moved)
