"""A video's web rendition and its one stored copy: claim, progress, record, retry or fail, re-drive; drop the original.

The transcode runs after the file is ready (processing/transcode.py); nothing
here changes the file's status. The rendition's state is in the row's metadata
(attachments/renditions.py). A job *claims* the work (a token and a deadline in
that state) under the row lock, so two jobs never make one rendition at once; a
claim whose deadline passed belongs to a job that died, and the scheduler tick
sends the work again (`renditions_redrive`), which starts it over.

Once a video's location-free copy is durable (stored and read back before the
file became ready), the original is removed (`attachment_original_drop`): the
row's working key becomes the copy, so rescans and reprocessing read the copy,
and the usage counter counts the copy's size. The audit row keeps the original's
SHA-256 and size as evidence (docs/api.md, "One stored copy").
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from .. import hooks, jobs, renditions
from ..models import Attachment, DeadLetter, Lifecycle, Status
from ..retention.services.dead_letters import dead_letter_open, dead_letters_answered
from ..storage import get_gateway
from . import outbox, quotas
from .audit import ORIGINAL_REMOVED, RENDITION_FAILED, RENDITION_READY, audit_entry
from .derivatives import derivatives_upsert
from .processing import backoff_seconds
from .transitions import lock_attachment, save_fields

log = logging.getLogger("airlock.renditions")

WORKER = "worker"
CLAIM_GRACE_SECONDS = 60  # past the job's own wall limit, a claim's job is taken for dead
# A pending rendition whose job neither ran nor was claimed this long after it was queued is
# sent again (its message was lost with a broker or a worker); a duplicate only finds the claim.
REDRIVE_AFTER_SECONDS = 15 * 60
REDRIVE_BATCH = 100


@dataclass(frozen=True)
class RenditionJob:
    """What a claimed transcode works from: the served copy, never the original."""

    attachment_id: uuid.UUID
    tenant_id: int
    tenant_slug: str
    token: str
    source_key: str
    source_size: int
    duration_seconds: float


def _iso(moment: datetime) -> str:
    return moment.isoformat()


def _parse(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _save_state(attachment: Attachment, state: dict[str, Any]) -> None:
    metadata = dict(attachment.metadata or {})
    metadata["renditions"] = {**(metadata.get("renditions") or {}), renditions.WEB: state}
    attachment.metadata = metadata
    save_fields(attachment, ["metadata"], usage_before=quotas.usage_snapshot(attachment))


def _live(attachment: Attachment | None) -> bool:
    return (
        attachment is not None
        and attachment.status == Status.READY
        and attachment.lifecycle not in (Lifecycle.DISCARDED, Lifecycle.DELETED)
    )


def _claimed_state(attachment: Attachment | None, token: str) -> dict[str, Any] | None:
    """The web state, if `token`'s claim on a still-ready file is the row's."""
    if attachment is None or not _live(attachment):
        return None
    state = renditions.web_state(attachment.metadata)
    if state is None or state.get("status") != renditions.PENDING or state.get("claim") != token:
        return None
    return dict(state)


def rendition_claim(
    *, attachment_id: uuid.UUID, wall_seconds_for: Callable[[float], float], now: datetime | None = None
) -> RenditionJob | None:
    """Claim a ready video's pending web rendition for one job; None when there is nothing to do.

    Nothing to do: not ready (any more), no pending rendition, or another job's claim
    still running. A claim past its deadline (its job died) is taken over: the
    transcode starts over. `wall_seconds_for(duration)` is how long the job may take.
    """
    now = now or timezone.now()
    with transaction.atomic():
        attachment = lock_attachment(attachment_id)
        if attachment is None or not _live(attachment):
            return None
        state = renditions.web_state(attachment.metadata)
        if state is None or state.get("status") != renditions.PENDING:
            return None
        until = _parse(state.get("claimed_until"))
        if state.get("claim") and until is not None and until > now:
            return None
        token = uuid.uuid4().hex
        duration = float((attachment.metadata or {}).get("duration_seconds") or 0)
        wall_seconds = wall_seconds_for(duration)
        state = {
            **state,
            "claim": token,
            "claimed_until": _iso(now + timedelta(seconds=wall_seconds + CLAIM_GRACE_SECONDS)),
            "progress": 0.0,
        }
        _save_state(attachment, state)
        return RenditionJob(
            attachment_id=attachment.pk,
            tenant_id=attachment.tenant_id,
            tenant_slug=attachment.tenant.slug,
            token=token,
            source_key=attachment.served_key or attachment.working_key,
            source_size=attachment.size or 0,
            duration_seconds=duration,
        )


def rendition_progress(*, attachment_id: uuid.UUID, token: str, progress: float) -> bool:
    """Record how far a claimed transcode got (0–1); False when the claim is no longer the row's."""
    with transaction.atomic():
        attachment = lock_attachment(attachment_id)
        state = _claimed_state(attachment, token)
        if state is None or attachment is None:
            return False
        state["progress"] = round(max(0.0, min(1.0, progress)), 3)
        _save_state(attachment, state)
        return True


def rendition_record(*, attachment_id: uuid.UUID, token: str, derivative: dict[str, Any], codec: str) -> bool:
    """The rendition is stored and read back: record it, mark it ready, announce it; False if the claim moved on."""
    with transaction.atomic():
        attachment = lock_attachment(attachment_id)
        state = _claimed_state(attachment, token)
        if state is None or attachment is None:
            return False
        derivatives_upsert(attachment, [derivative])
        state.update(
            status=renditions.READY,
            progress=1.0,
            codec=codec,
            width=derivative.get("width"),
            height=derivative.get("height"),
            bytes=derivative["size"],
            claim=None,
            claimed_until=None,
            error=None,
        )
        _save_state(attachment, state)
        audit_entry(
            attachment.pk,
            event=RENDITION_READY,
            actor=WORKER,
            details={"rendition": renditions.WEB, "bytes": derivative["size"], "width": state["width"]},
        ).save()
        hooks.announce("rendition_ready", [attachment.pk])
        return True


def rendition_fail(
    *, attachment_id: uuid.UUID, token: str, error: str, retry: bool, now: datetime | None = None
) -> str | None:
    """A transcode that did not finish: pending again with backoff, or failed + dead letter; the file stays ready.

    `retry`: the trouble may pass (the sandbox or storage was away). A content
    outcome (over the time bounds, a stream the decoder refuses) is final at once:
    the same bytes would fail the same way. None when the claim moved on.
    """
    now = now or timezone.now()
    with transaction.atomic():
        attachment = lock_attachment(attachment_id)
        state = _claimed_state(attachment, token)
        if state is None or attachment is None:
            return None
        attempts = int(state.get("attempts") or 0) + 1
        state.update(attempts=attempts, claim=None, claimed_until=None, error=error[:300])
        if retry and attempts < settings.AIRLOCK_RETRIES.max_attempts:
            delay = backoff_seconds(attempts)
            state.update(progress=0.0, queued_at=_iso(now + timedelta(seconds=delay)))
            _save_state(attachment, state)
            outbox.enqueue(jobs.TRANSCODE, attachment.pk, attachment.tenant_id, delay_ms=int(delay * 1000))
            return "retried"
        state.update(status=renditions.FAILED, progress=None)
        _save_state(attachment, state)
        audit_entry(
            attachment.pk, event=RENDITION_FAILED, actor=WORKER, message=error, details={"attempts": attempts}
        ).save()
        dead_letter_open(
            kind=DeadLetter.Kind.RENDITION,
            attachment=attachment,
            storage_key=attachment.served_key,
            last_error=error,
            payload={"rendition": renditions.WEB, "attempts": attempts},
        )
        return "failed"


def rendition_requeue(*, attachment_id: uuid.UUID, actor: str) -> bool:
    """Staff: a failed web rendition is tried again with fresh attempts (the file itself is untouched)."""
    with transaction.atomic():
        attachment = lock_attachment(attachment_id)
        if attachment is None or not _live(attachment):
            return False
        state = renditions.web_state(attachment.metadata)
        if state is None or state.get("status") != renditions.FAILED:
            return False
        state = {
            **state,
            "status": renditions.PENDING,
            "attempts": 0,
            "progress": 0.0,
            "queued_at": _iso(timezone.now()),
        }
        _save_state(attachment, state)
        outbox.enqueue(jobs.TRANSCODE, attachment.pk, attachment.tenant_id)
        dead_letters_answered([attachment.pk], actor=actor, kind=DeadLetter.Kind.RENDITION)
        log.info("rendition requeued", extra={"attachment_id": str(attachment_id), "actor": actor})
        return True


def renditions_redrive(*, now: datetime | None = None) -> int:
    """Send again the transcodes whose job was lost: a claim past its deadline, or queued long ago and never claimed."""
    now = now or timezone.now()
    pending = Attachment.objects.filter(status=Status.READY, metadata__renditions__web__status=renditions.PENDING)
    ids = list(pending.order_by("ready_at").values_list("pk", flat=True)[: REDRIVE_BATCH * 4])
    sent = 0
    for attachment_id in ids:
        with transaction.atomic():
            attachment = lock_attachment(attachment_id)
            if attachment is None or not _live(attachment):
                continue
            state = renditions.web_state(attachment.metadata)
            if state is None or state.get("status") != renditions.PENDING:
                continue
            until = _parse(state.get("claimed_until"))
            queued = _parse(state.get("queued_at")) or attachment.ready_at
            if state.get("claim"):
                lost = until is None or until <= now
            else:
                lost = queued is None or queued <= now - timedelta(seconds=REDRIVE_AFTER_SECONDS)
            if not lost:
                continue
            _save_state(attachment, {**state, "claim": None, "claimed_until": None, "queued_at": _iso(now)})
            outbox.enqueue(jobs.TRANSCODE, attachment.pk, attachment.tenant_id)
            sent += 1
        if sent >= REDRIVE_BATCH:
            break
    if sent:
        log.info("lost transcodes sent again", extra={"count": sent})
    return sent


# --- one stored copy -----------------------------------------------------------------------


def original_droppable(attachment: Attachment) -> bool:
    """A ready video whose served copy is a rendition of its own (not the original), original still stored."""
    return (
        _live(attachment)
        and renditions.web_state(attachment.metadata) is not None
        and bool(attachment.served_key)
        and attachment.served_key != attachment.working_key
        and not attachment.legal_hold
    )


def attachment_original_drop(*, attachment_id: uuid.UUID, digest: Callable[[str], str]) -> bool:
    """Remove a ready video's original once its location-free copy is what the row serves; False if not (yet).

    `digest(key)` reads the original and returns its SHA-256 (the evidence the
    audit keeps); it runs before the row lock. The row then works from the copy:
    `content_key` names it and `stored_size` is its size (the usage counter follows).
    The original's objects are deleted after the commit; one left by a crash in
    between is still named by the row and is deleted with it.
    """
    attachment = Attachment.objects.for_transition().by_pk(attachment_id)
    if attachment is None or not original_droppable(attachment):
        return False
    original = attachment.working_key
    sha256 = attachment.declared_sha256 or digest(original)
    with transaction.atomic():
        attachment = lock_attachment(attachment_id)
        if attachment is None or not original_droppable(attachment) or attachment.working_key != original:
            return False
        gone = [key for key in dict.fromkeys((attachment.content_key, attachment.storage_key)) if key]
        usage_before = quotas.usage_snapshot(attachment)
        stored_before = attachment.stored_size
        attachment.content_key = attachment.served_key
        attachment.stored_size = attachment.size
        save_fields(attachment, ["content_key", "stored_size"], usage_before=usage_before)
        audit_entry(
            attachment.pk,
            event=ORIGINAL_REMOVED,
            actor=WORKER,
            message="The original was removed; the location-free copy is the one stored copy.",
            details={"sha256": sha256, "size": stored_before, "key": original, "kept": attachment.served_key},
        ).save()
        transaction.on_commit(lambda: _delete_quietly(gone))
    return True


def _delete_quietly(keys: list[str]) -> None:
    gateway = get_gateway()
    for key in keys:
        try:
            gateway.delete(key)
        except Exception as exc:  # noqa: BLE001 - the row still names it: deleted with the file later
            log.warning("could not delete a removed original", extra={"key": key, "error": str(exc)[:300]})
