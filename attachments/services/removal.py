"""The end of a row's life: released (restorable for a grace), then its stored objects are gone, so it is
marked deleted; failed deletes are counted.

The sweeper (and its dead-letter desk) decide what to delete and talk to
storage; the rows change here, like every other Attachment write.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from django.conf import settings

from ..models import Attachment, Lifecycle
from ..retention.services.holds import refuse_held
from .quotas import usage_release
from .transitions import lifecycle_audit


def grace() -> timedelta:
    """How long a released file stays restorable (AIRLOCK_LIFECYCLE_SECONDS.release_grace)."""
    return timedelta(seconds=settings.AIRLOCK_LIFECYCLE_SECONDS.release_grace)


def release_locked(rows: Iterable[Attachment], *, now: datetime, actor: str, message: str = "") -> list[uuid.UUID]:
    """Release committed rows the caller has locked; return their ids (already released ones are left as they are).

    LEGAL_HOLD when any of them is held (release by ref or ids, DELETE, commit replace, all refuse).
    """
    committed = [a for a in rows if a.lifecycle == Lifecycle.COMMITTED]
    if not committed:
        return []
    ids = [a.pk for a in committed]
    refuse_held(ids, what="released")  # all or nothing: the caller's transaction rolls back
    # Still counted (quotas.COUNTED_LIFECYCLES): the bytes stay until the sweep, which stops the count.
    Attachment.objects.filter(pk__in=ids).update(
        lifecycle=Lifecycle.RELEASED, released_at=now, expires_at=now + grace(), updated_at=now
    )
    lifecycle_audit(
        [(pk, Lifecycle.COMMITTED) for pk in ids], event="release", to=Lifecycle.RELEASED, actor=actor, message=message
    )
    return ids


# Lifecycles whose rows the sweeper may delete (once expires_at has passed): never committed ones.
REAPABLE = (Lifecycle.STAGED, Lifecycle.DISCARDED, Lifecycle.RELEASED)


def attachments_mark_deleted(
    *, before: Mapping[uuid.UUID, str], now: datetime, actor: str, event: str, message: str = ""
) -> int:
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
    Attachment.objects.filter(pk=attachment_id).update(
        delete_attempts=attempts, delete_error=error[:500], updated_at=now
    )
