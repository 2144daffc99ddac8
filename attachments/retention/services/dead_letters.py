"""Dead letters: work that ran out of automatic retries (or could never run) is handed to a human here.

One function opens them, whichever part of Airlock gave up: the pipeline at its
attempt cap, a malformed queue message, a storage-event message, a sweep delete
that kept failing. Resolving them is staff's (attachments/services/moderation.py,
sweeper/dead_letters.py).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.utils import timezone

from ...models import Attachment, DeadLetter

# last_error is a TextField; the cap keeps one runaway traceback from bloating the table.
LAST_ERROR_LIMIT = 5000


def dead_letter_open(
    *,
    kind: str,
    last_error: str,
    attachment: Attachment | None = None,
    attachment_id: uuid.UUID | None = None,
    storage_key: str = "",
    history: list[dict[str, Any]] | None = None,
    payload: dict[str, Any] | None = None,
) -> DeadLetter:
    """A new open dead letter of `kind` (a DeadLetter.Kind); pass the attachment, or only its id."""
    if kind not in DeadLetter.Kind.values:
        raise ValueError(f"unknown dead letter kind {kind!r}")
    return DeadLetter.objects.create(
        kind=kind,
        attachment=attachment,
        **({"attachment_id": attachment_id} if attachment is None and attachment_id is not None else {}),
        storage_key=storage_key,
        last_error=last_error[:LAST_ERROR_LIMIT],
        history=list(history or []),
        payload=dict(payload or {}),
    )


def dead_letter_note(
    letter: DeadLetter,
    *,
    actor: str,
    now: datetime,
    action: str,
    resolve: bool = False,
    last_error: str | None = None,
    payload: dict[str, Any] | None = None,
    details: dict[str, Any] | None = None,
) -> None:
    """Record what a human did with a dead letter (`action`, and `details`) in its history; `resolve` closes it.

    `last_error` and `payload` replace the letter's when given (a retry's failures,
    the objects abandoned). Call it inside the transaction that locked the letter.
    """
    if resolve:
        letter.resolved_at, letter.resolved_by = now, actor[:150]
    if last_error is not None:
        letter.last_error = last_error[:LAST_ERROR_LIMIT]
    if payload is not None:
        letter.payload = payload
    letter.history = [*letter.history, {"at": now.isoformat(), "by": actor, "action": action, **(details or {})}]
    letter.save(update_fields=["resolved_at", "resolved_by", "history", "payload", "last_error"])


def dead_letters_answered(attachment_ids: list[Any], *, actor: str, kind: str | None = None) -> int:
    """Resolve the open dead letters these files' reprocessing answers (of `kind` only, if given); how many.

    A sweep dead letter is about deleting objects, not processing them: it stays
    open until its objects are gone (sweeper/dead_letters.py).
    """
    letters = DeadLetter.objects.filter(attachment_id__in=attachment_ids, resolved_at__isnull=True)
    letters = letters.filter(kind=kind) if kind else letters.exclude(kind=DeadLetter.Kind.SWEEP)
    return letters.update(resolved_at=timezone.now(), resolved_by=actor[:150])
