"""Perform a named transition on a locked row, save it and append the audit row."""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django_fsm import TransitionNotAllowed

from .. import hooks, waiting
from ..models import Attachment, TransitionLog
from ..naming import parse_key
from . import quotas

log = logging.getLogger("airlock.transitions")

# Where lock_attachment keeps the values it loaded, so a save writes only what changed.
_LOADED = "_airlock_loaded"
_CONCRETE = tuple((f.name, f.attname) for f in Attachment._meta.concrete_fields if not f.primary_key)


class TransitionConflict(Exception):
    """The row is not in a state that allows this transition (someone else won)."""


def lock_attachment(attachment_id: Any, *, fields: Iterable[str] | None = None) -> Attachment | None:
    """Lock one attachment row for the rest of the transaction.

    With `fields`, only those columns are read: the pipeline reads a dozen of
    the row's columns, not its extracted text. The caller should name every
    column it (or the transition) reads: a deferred column costs one more query
    on first touch (attachments/services/processing.py, LOCK_FIELDS).
    The loaded values are remembered so that save_changes() and apply_transition()
    write back only the columns that changed.
    """
    qs = Attachment.objects.select_for_update().filter(pk=attachment_id)
    if fields is not None:
        qs = qs.only(*fields)
    # A slice, not first(): the primary key matches one row, so no ORDER BY to build.
    attachment = next(iter(qs[:1]), None)
    if attachment is not None:
        _remember_loaded(attachment)
    return attachment


def _remember_loaded(attachment: Attachment) -> None:
    values = attachment.__dict__
    # JSON values are copied: a caller that edits one in place still counts as a change.
    setattr(attachment, _LOADED, {
        attname: copy.deepcopy(values[attname]) if isinstance(values[attname], (dict, list)) else values[attname]
        for _name, attname in _CONCRETE if attname in values
    })


def save_changes(attachment: Attachment, *, usage_before: dict[str, Any] | None = None) -> None:
    """Save a row: only its changed columns when lock_attachment loaded it, else all of them.

    Unchanged columns hold what the locked row holds, so leaving them out writes
    the same row with a shorter UPDATE (and never writes a column this
    transaction did not read). `updated_at` is always written, as a full save does.
    The tenant's usage counter follows a change of status or stored size, from
    what was loaded (or `usage_before`, for a row lock_attachment did not load).
    """
    loaded = getattr(attachment, _LOADED, None)
    before = loaded if loaded is not None else usage_before
    delta = quotas.usage_delta(attachment, before=before) if before is not None else (0, 0)
    if loaded is None:
        attachment.save()
    else:
        values = attachment.__dict__
        missing = object()
        changed = [name for name, attname in _CONCRETE
                   if attname in values and loaded.get(attname, missing) != values[attname]]
        attachment.save(update_fields=[*changed, "updated_at"])
        _remember_loaded(attachment)
    quotas.usage_apply(attachment.tenant_id, delta, change_written=True)


def apply_transition(attachment: Attachment, name: str, *, actor: str, note: str = "", **kwargs: Any) -> Attachment:
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("transitions run inside transaction.atomic() on a locked row")
    from_status = attachment.status
    started = time.monotonic()
    usage_before = None if hasattr(attachment, _LOADED) else quotas.usage_snapshot(attachment)
    try:
        getattr(attachment, name)(**kwargs)
    except TransitionNotAllowed as exc:
        raise TransitionConflict(f"{name} not allowed from {from_status}") from exc
    # ConcurrentTransitionMixin still conditions the UPDATE on the status it loaded.
    save_changes(attachment, usage_before=usage_before)
    waiting.changed(attachment.pk)  # wakes `?wait=` requests once this commits
    TransitionLog.objects.create(
        attachment=attachment,
        transition=name,
        from_status=from_status,
        to_status=attachment.status,
        actor=actor[:150],
        reason_code=attachment.reason_code if attachment.status in ("rejected", "failed") else "",
        message=(note or (attachment.reason_message if attachment.status in ("rejected", "failed") else ""))[:500],
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
        },
    )
    return attachment


# Lifecycle changes (orthogonal to status) go to the same audit table, so the admin
# timeline shows them in order with the status transitions: their from/to columns
# hold lifecycle states (staged, committed, discarded, deleted), never a status.
LIFECYCLE_EVENTS = ("commit", "discard", "discard_all", "replace", "sweep_delete", "abandon")


def lifecycle_audit(rows: Iterable[tuple[Any, str]], *, event: str, to: str, actor: str, message: str = "") -> None:
    """Record one lifecycle change per (attachment id, lifecycle before) with its actor."""
    if event not in LIFECYCLE_EVENTS:
        raise ValueError(f"unknown lifecycle event {event!r}")
    logs = [TransitionLog(attachment_id=pk, transition=event, from_status=before, to_status=to, actor=actor[:150],
                          message=message[:500]) for pk, before in rows]
    if logs:
        TransitionLog.objects.bulk_create(logs)
        outcome = hooks.outcome_of_lifecycle(event, to)
        if outcome:
            hooks.announce(outcome, [entry.attachment_id for entry in logs])


def user_actor(user: Any) -> str:
    return f"user:{user.get_username()}"


def _tenant_slug(attachment: Attachment) -> str:
    """The tenant's slug for logs, without a query: keys are minted as tenants/<slug>/…."""
    if "tenant" in attachment._state.fields_cache:
        return attachment.tenant.slug
    parsed = parse_key(attachment.storage_key)
    return parsed.tenant_slug if parsed else str(attachment.tenant_id)
