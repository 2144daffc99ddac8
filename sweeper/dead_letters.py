"""Sweep dead letters: rows whose objects could not be deleted within the attempt cap wait for a human.

A human has three ways out, each a service the admin calls:

- retry: delete the objects now (under the brakes) and, when every key is
  gone, mark the row deleted and close the letter; otherwise say which keys
  failed and why, and leave the letter open;
- resolve: close the letter only once storage confirms every key is gone
  (or after the objects were explicitly abandoned);
- abandon: give up on the objects with a reason (recorded on the letter, in
  the log and the row's history); the row is marked deleted, the letter closed,
  and reconcile keeps trying the leftovers as it does for every deleted row.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from attachments.models import Attachment, DeadLetter, Derivative
from attachments.retention.services.dead_letters import dead_letter_note
from attachments.retention.services.holds import held_ids
from attachments.services.removal import REAPABLE, attachments_mark_deleted
from attachments.storage import get_gateway
from attachments.storage.base import StorageGateway

from .control import delete_brake

log = logging.getLogger("airlock.sweeper")


class DeadLetterRefused(ValueError):
    """The letter cannot be handled this way (the message says why); nothing changed."""


@dataclass
class RetryResult:
    deleted: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    resolved: bool = False
    reason: str = ""  # why nothing (more) was done


def _open_sweep_letter(dead_letter_id: int) -> DeadLetter:
    letter = (
        DeadLetter.objects.select_for_update()
        .filter(pk=dead_letter_id, kind=DeadLetter.Kind.SWEEP, resolved_at__isnull=True)
        .first()
    )
    if letter is None:
        raise DeadLetterRefused("not an open sweep dead letter")
    return letter


def _keys(letter: DeadLetter) -> list[str]:
    """The letter's keys and every key its row still stores (never derived from a URL)."""
    keys = [str(k) for k in (letter.payload or {}).get("keys", [])]
    row = (
        Attachment.objects.filter(pk=letter.attachment_id)
        .values_list("storage_key", "content_key", "served_key", "quarantine_key")
        .first()
        if letter.attachment_id
        else None
    )
    keys += [k for k in (row or ()) if k]
    if letter.attachment_id:
        keys += Derivative.objects.filter(attachment_id=letter.attachment_id).values_list("storage_key", flat=True)
    return list(dict.fromkeys(keys))


def _close(
    letter: DeadLetter,
    *,
    actor: str,
    now: datetime,
    action: str,
    payload: dict[str, Any] | None = None,
    **extra: object,
) -> None:
    """Mark the row deleted (its objects are gone or abandoned) and resolve the letter.

    Refused while the file is held: a held file survives every delete path, and a
    deleted row's leftovers are what reconcile deletes next.
    """
    if letter.attachment_id is not None:
        list(Attachment.objects.select_for_update().filter(pk=letter.attachment_id).values_list("pk"))
        if held_ids([letter.attachment_id]):
            raise DeadLetterRefused("the file is under a legal hold: its objects are kept until it is cleared")
        before = (
            Attachment.objects.filter(pk=letter.attachment_id, lifecycle__in=REAPABLE)
            .values_list("lifecycle", flat=True)
            .first()
        )
        if before is not None:
            attachments_mark_deleted(
                before={letter.attachment_id: before},
                now=now,
                actor=actor,
                event="abandon" if action == "abandon" else "sweep_delete",
                message=f"dead letter #{letter.pk}: {action}",
            )
    dead_letter_note(letter, actor=actor, now=now, action=action, resolve=True, payload=payload, details=extra)


def sweep_dead_letter_retry(
    *, dead_letter_id: int, actor: str, gateway: StorageGateway | None = None, now: datetime | None = None
) -> RetryResult:
    """Delete the letter's objects now; close it when every key is gone, else report which failed."""
    if not actor:
        raise ValueError("actor is required")
    now = now or timezone.now()
    gateway = gateway or get_gateway()
    result = RetryResult()
    with transaction.atomic():
        letter = _open_sweep_letter(dead_letter_id)
        brake = delete_brake()
        if brake:
            result.reason = (
                "killswitch on: nothing deleted" if brake == "killswitch" else "sweeper dry run on: nothing deleted"
            )
            dead_letter_note(letter, actor=actor, now=now, action="retry", details={"result": result.reason})
            return result
        # The row stays locked while its objects go, as in a sweep batch.
        if letter.attachment_id:
            list(Attachment.objects.select_for_update().filter(pk=letter.attachment_id).values_list("pk"))
            if held_ids([letter.attachment_id]):  # held after the sweep gave up: its objects stay
                raise DeadLetterRefused("the file is under a legal hold: its objects are kept until it is cleared")
        for key in _keys(letter):
            try:
                gateway.delete(key)  # "already gone" counts as done: the key is one we stored
                result.deleted.append(key)
            except Exception as exc:  # noqa: BLE001 - reported to the human who asked
                result.failed[key] = f"{type(exc).__name__}: {exc}"[:300]
        if result.failed:
            result.reason = f"{len(result.failed)} object(s) could not be deleted"
            dead_letter_note(
                letter,
                actor=actor,
                now=now,
                action="retry",
                last_error="; ".join(f"{k}: {e}" for k, e in result.failed.items())[:2000],
                details={"result": "failed", "failed": result.failed},
            )
            return result
        _close(letter, actor=actor, now=now, action="retry", result="deleted", keys=result.deleted)
        result.resolved = True
    log.warning("sweep dead letter retried: objects deleted", extra={"dead_letter": dead_letter_id, "actor": actor})
    return result


def sweep_dead_letter_resolve(
    *, dead_letter_id: int, actor: str, gateway: StorageGateway | None = None, now: datetime | None = None
) -> None:
    """Close the letter once storage confirms every object is gone (or they were abandoned)."""
    if not actor:
        raise ValueError("actor is required")
    now = now or timezone.now()
    gateway = gateway or get_gateway()
    with transaction.atomic():
        letter = _open_sweep_letter(dead_letter_id)
        if not (letter.payload or {}).get("abandoned"):
            remaining = [k for k in _keys(letter) if gateway.head(k) is not None]
            if remaining:
                raise DeadLetterRefused(
                    f"{len(remaining)} object(s) still stored ({', '.join(remaining[:3])}): retry the delete, "
                    "or abandon the objects with a reason"
                )
        _close(letter, actor=actor, now=now, action="resolve", result="verified gone")


def sweep_dead_letter_abandon(*, dead_letter_id: int, actor: str, reason: str, now: datetime | None = None) -> None:
    """Give up on deleting the objects, saying why: audited, then the letter is closed."""
    if not actor:
        raise ValueError("actor is required")
    reason = (reason or "").strip()
    if not reason:
        raise DeadLetterRefused("abandoning objects needs a reason")
    now = now or timezone.now()
    with transaction.atomic():
        letter = _open_sweep_letter(dead_letter_id)
        keys = _keys(letter)
        abandoned = {"by": actor[:150], "at": now.isoformat(), "reason": reason[:500]}
        _close(
            letter,
            actor=actor,
            now=now,
            action="abandon",
            payload={**(letter.payload or {}), "abandoned": abandoned},
            reason=reason[:500],
            keys=keys,
        )
    log.warning(
        "sweep dead letter: objects abandoned",
        extra={"dead_letter": dead_letter_id, "actor": actor, "reason": reason[:500], "keys": keys[:20]},
    )
