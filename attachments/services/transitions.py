"""Perform a named transition on a locked row, save it and append the audit row."""

from __future__ import annotations

import logging
import time
from typing import Any

from django.db import transaction
from django_fsm import TransitionNotAllowed

from ..models import Attachment, TransitionLog

log = logging.getLogger("airlock.transitions")


class TransitionConflict(Exception):
    """The row is not in a state that allows this transition (someone else won)."""


def lock_attachment(attachment_id: Any) -> Attachment | None:
    """Lock one attachment row for the rest of the transaction."""
    return Attachment.objects.select_for_update().filter(pk=attachment_id).first()


def apply_transition(attachment: Attachment, name: str, *, actor: str, note: str = "", **kwargs: Any) -> Attachment:
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("transitions run inside transaction.atomic() on a locked row")
    from_status = attachment.status
    started = time.monotonic()
    try:
        getattr(attachment, name)(**kwargs)
    except TransitionNotAllowed as exc:
        raise TransitionConflict(f"{name} not allowed from {from_status}") from exc
    attachment.save()
    TransitionLog.objects.create(
        attachment=attachment,
        transition=name,
        from_status=from_status,
        to_status=attachment.status,
        actor=actor[:150],
        reason_code=attachment.reason_code if attachment.status in ("rejected", "failed") else "",
        message=(note or (attachment.reason_message if attachment.status in ("rejected", "failed") else ""))[:500],
    )
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


def _tenant_slug(attachment: Attachment) -> str:
    """The tenant's slug for logs, without a query: keys are minted as tenants/<slug>/…."""
    if "tenant" in attachment._state.fields_cache:
        return attachment.tenant.slug
    parts = attachment.storage_key.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tenants" else str(attachment.tenant_id)
