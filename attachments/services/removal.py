"""The end of a row's life: its stored objects are gone, so it is marked deleted; failed deletes are counted.

The sweeper (and its dead-letter desk) decide what to delete and talk to
storage; the rows change here, like every other Attachment write.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime

from ..models import Attachment, Lifecycle
from .quotas import usage_release
from .transitions import lifecycle_audit

# Lifecycles whose rows the sweeper may delete: never committed ones.
REAPABLE = (Lifecycle.STAGED, Lifecycle.DISCARDED)


def attachments_mark_deleted(*, before: Mapping[uuid.UUID, str], now: datetime, actor: str, event: str,
                             message: str = "") -> int:
    """Mark the rows (id -> lifecycle they had) deleted, release their quota usage and audit it.

    The caller holds the rows' locks (or has just re-read them under its
    transaction); only rows still reapable change. Returns how many did.
    """
    if not before:
        return 0
    rows = Attachment.objects.filter(pk__in=list(before), lifecycle__in=REAPABLE)
    usage_release(rows)
    changed = rows.update(lifecycle=Lifecycle.DELETED, deleted_at=now, updated_at=now, delete_error="")
    lifecycle_audit(list(before.items()), event=event, to=Lifecycle.DELETED, actor=actor, message=message)
    return changed


def attachment_delete_failed(*, attachment_id: uuid.UUID, attempts: int, error: str, now: datetime) -> None:
    """Count a failed attempt to delete the row's objects (the sweeper retries, then dead-letters)."""
    Attachment.objects.filter(pk=attachment_id).update(delete_attempts=attempts, delete_error=error[:500],
                                                       updated_at=now)
