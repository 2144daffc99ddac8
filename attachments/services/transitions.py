"""Perform a named transition on a locked row, save what it wrote and append the audit row."""

from __future__ import annotations

import copy
import functools
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

from django.db import transaction
from django.utils import timezone
from django_fsm import FSMField, TransitionNotAllowed

from .. import hooks, waiting
from ..models import Attachment, Status, TransitionLog
from ..naming import parse_key
from ..variants.services.purge import variants_forget
from . import quotas

log = logging.getLogger("airlock.transitions")


class TransitionConflict(Exception):
    """The row is not in a state that allows this transition (someone else won)."""


def lock_attachment(attachment_id: Any) -> Attachment | None:
    """Lock one attachment row for the rest of the transaction, read with the columns services use."""
    return Attachment.objects.for_transition().select_for_update().by_pk(attachment_id)


@functools.cache
def transition_writes(name: str) -> tuple[str, ...]:
    """The columns the named transition sets besides the status (declared on the model)."""
    status = cast(FSMField, Attachment._meta.get_field("status"))
    return next(tuple(t.custom["writes"]) for t in status.get_all_transitions(Attachment) if t.name == name)


def save_fields(attachment: Attachment, names: Iterable[str], *, usage_before: Mapping[str, Any]) -> None:
    """Save the named columns (and updated_at); the usage counters follow its status and size.

    `usage_before` is quotas.usage_snapshot() of the row as it was locked, taken
    before anything was set on it.
    """
    delta = quotas.usage_delta(attachment, before=usage_before)
    attachment.save(update_fields=[*names, "updated_at"])
    quotas.usage_move(attachment, delta, change_written=True)


def apply_transition(
    attachment: Attachment,
    name: str,
    *,
    actor: str,
    note: str = "",
    fields: Mapping[str, Any] | None = None,
    audit: Sequence[TransitionLog] = (),
    details: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> Attachment:
    """Set `fields` (a step's facts), run the transition, save those + the status + its declared writes, audit it.

    `audit`: entries recorded just before the transition's own (services/audit.py), in the same INSERT;
    `details`: the transition's own row's details.
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("transitions run inside transaction.atomic() on a locked row")
    from_status, started = attachment.status, time.monotonic()
    usage_before = quotas.usage_snapshot(attachment)
    _run(attachment, name, fields, kwargs)
    # ConcurrentTransitionMixin still conditions the UPDATE on the status it loaded.
    save_fields(attachment, _written(name, fields), usage_before=usage_before)
    _record(attachment, name, from_status, started, actor=actor, note=note, audit=audit, details=details)
    return attachment


def apply_transition_unlocked(
    read: Attachment,
    name: str,
    *,
    guard: Mapping[str, Any],
    actor: str,
    note: str = "",
    fields: Mapping[str, Any] | None = None,
    audit: Sequence[TransitionLog] = (),
    details: Mapping[str, Any] | None = None,
    before_record: Callable[[Attachment], object] | None = None,
    **kwargs: Any,
) -> Attachment | None:
    """apply_transition on a row read without its lock: one UPDATE that re-checks what the read saw.

    The transition runs on a copy of `read` (django-fsm checks its source state
    as usual); the UPDATE is conditioned on the status and the usage columns
    (quotas.USAGE_FIELDS) as read, and on `guard` (what else the caller's
    decision rested on: the lease, the stage). PostgreSQL re-checks the WHERE
    clause on the newest row version and the UPDATE holds the row until commit,
    so the usage delta computed from the read is exact. Returns the copy as
    written, or None when the row moved on: nothing is written and `read` is
    left as it was (the caller takes the locked path, which decides what the
    change means). `before_record` runs after the UPDATE and before the audit
    rows and the outcome's listeners (a webhook's body shows what it wrote).
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("transitions run inside transaction.atomic()")
    missing = set(quotas.USAGE_FIELDS) & read.get_deferred_fields()
    if missing:
        raise ValueError(f"an unlocked transition needs the usage columns read: {sorted(missing)}")
    attachment = copy.copy(read)
    from_status, started = attachment.status, time.monotonic()
    usage_before = quotas.usage_snapshot(attachment)
    _run(attachment, name, fields, kwargs)
    written = _written(name, fields)
    delta = quotas.usage_delta(attachment, before=usage_before)  # every usage column is in `before`: no query
    updated = Attachment.objects.filter(pk=read.pk, **usage_before, **guard).update(
        **{column: getattr(attachment, column) for column in written}, updated_at=timezone.now()
    )
    if not updated:
        return None
    quotas.usage_move(attachment, delta, change_written=True)
    if before_record is not None:
        before_record(attachment)
    _record(attachment, name, from_status, started, actor=actor, note=note, audit=audit, details=details)
    return attachment


def _run(attachment: Attachment, name: str, fields: Mapping[str, Any] | None, kwargs: Mapping[str, Any]) -> None:
    """Set `fields` on the instance and run the named transition's method (django-fsm's source check)."""
    from_status = attachment.status
    for field_name, value in (fields or {}).items():
        setattr(attachment, field_name, value)
    try:
        getattr(attachment, name)(**kwargs)
    except TransitionNotAllowed as exc:
        raise TransitionConflict(f"{name} not allowed from {from_status}") from exc


def _written(name: str, fields: Mapping[str, Any] | None) -> list[str]:
    """The columns a transition writes: the status, its declared writes and the facts given with it."""
    return ["status", *transition_writes(name), *(fields or {})]


def _record(
    attachment: Attachment,
    name: str,
    from_status: str,
    started: float,
    *,
    actor: str,
    note: str,
    audit: Sequence[TransitionLog],
    details: Mapping[str, Any] | None,
) -> None:
    """What follows a transition's write: variants dropped, waiters woken, the audit rows, the outcome, the log."""
    if from_status == Status.READY and attachment.status != Status.READY:
        # Variants are served only while ready: a takedown, a rescan hit, a reprocess or a lost
        # original drops them (made again from what is served once the file is ready again).
        variants_forget(attachment.pk)
    waiting.changed(attachment.pk)  # wakes `?wait=` requests once this commits
    TransitionLog.objects.bulk_create(
        [
            *audit,
            TransitionLog(
                attachment=attachment,
                transition=name,
                from_status=from_status,
                to_status=attachment.status,
                actor=actor[:150],
                reason_code=attachment.reason_code if attachment.status in ("rejected", "failed") else "",
                message=(note or (attachment.reason_message if attachment.status in ("rejected", "failed") else ""))[
                    :500
                ],
                details=dict(details or {}),
            ),
        ]
    )
    outcome = hooks.outcome_of_transition(name, attachment.status)
    if outcome:
        hooks.announce(outcome, [attachment.pk])
    log.info(
        "transition",
        extra={
            "attachment_id": str(attachment.pk),
            "tenant": _tenant_slug(attachment),
            "step": name,
            "duration_ms": round((time.monotonic() - started) * 1000, 1),
            "outcome": attachment.status,
            "from_status": from_status,
            "actor": actor,
            "reason_code": attachment.reason_code or None,
            # why, in the log line itself: a rejection is final, a retry says what went wrong
            "reason_message": (
                note or (attachment.reason_message if attachment.status in ("rejected", "failed") else "")
            )[:300]
            or None,
        },
    )


# Lifecycle changes (orthogonal to status) go to the same audit table, so the admin
# timeline shows them in order with the status transitions: their from/to columns
# hold lifecycle states (staged, committed, discarded, released, deleted), never a status.
LIFECYCLE_EVENTS = (
    "commit",
    "discard",
    "discard_all",
    "replace",
    "sweep_delete",
    "abandon",
    "release",
    "restore",
    "erase",
)


def lifecycle_audit(rows: Iterable[tuple[Any, str]], *, event: str, to: str, actor: str, message: str = "") -> None:
    """Record one lifecycle change per (attachment id, lifecycle before) with its actor."""
    if event not in LIFECYCLE_EVENTS:
        raise ValueError(f"unknown lifecycle event {event!r}")
    logs = lifecycle_entries(((pk, before, to) for pk, before in rows), event=event, actor=actor, message=message)
    if logs:
        TransitionLog.objects.bulk_create(logs)
        outcome = hooks.outcome_of_lifecycle(event, to)
        if outcome:
            hooks.announce(outcome, [entry.attachment_id for entry in logs])


def lifecycle_entries(
    rows: Iterable[tuple[Any, str, str]], *, event: str, actor: str, message: str = ""
) -> list[TransitionLog]:
    """Unsaved audit rows, one per (attachment id, lifecycle before, lifecycle after), cut to their columns.

    Also for events that leave the lifecycle as it was (a legal hold), so the timeline shows it.
    """
    return [
        TransitionLog(
            attachment_id=pk,
            transition=event,
            from_status=before,
            to_status=after,
            actor=actor[:150],
            message=message[:500],
        )
        for pk, before, after in rows
    ]


def user_actor(user: Any) -> str:
    return f"user:{user.get_username()}"


def _tenant_slug(attachment: Attachment) -> str:
    """The tenant's slug for logs, without a query: keys are minted as tenants/<slug>/…."""
    if Attachment._meta.get_field("tenant").is_cached(attachment):
        return attachment.tenant.slug
    parsed = parse_key(attachment.storage_key)
    return parsed.tenant_slug if parsed else str(attachment.tenant_id)
