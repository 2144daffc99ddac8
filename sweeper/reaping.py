"""One sweep batch: lock expired rows, delete their objects by the stored keys, mark them deleted.

The batch is one transaction. Its rows are locked with SELECT … FOR UPDATE
SKIP LOCKED and filtered on lifecycle and expiry *by the locking query itself*,
so a row that a commit holds (or has just committed) is never in the batch:
a commit racing the sweep wins. Objects are deleted while the rows stay
locked, so no other sweeper can pick the same rows, and a commit that arrives
meanwhile waits and then finds the row deleted. One UPDATE marks the batch.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from django.contrib.postgres.expressions import ArraySubquery
from django.db import connection, transaction
from django.db.models import OuterRef, Q, QuerySet

from attachments.models import Attachment, DeadLetter, Derivative
from attachments.retention.services.dead_letters import dead_letter_open
from attachments.retention.services.holds import not_held_q
from attachments.services.removal import REAPABLE, attachment_delete_failed, attachments_mark_deleted

log = logging.getLogger("airlock.sweeper")
# Failed deletes of one row (one a sweep tick) before it goes to a human as a dead letter:
# enough to ride out a storage hiccup, few enough that a stuck object is seen the same hour.
DELETE_ATTEMPTS = 5

_SLICES_PER_WORKER = 4
_COLUMNS = (
    "pk",
    "expires_at",
    "storage_key",
    "served_key",
    "quarantine_key",
    "delete_attempts",
    "content_key",
    "multipart_upload_id",
    "lifecycle",
)
_UPLOAD_ID = _COLUMNS.index("multipart_upload_id")
_LIFECYCLE = _COLUMNS.index("lifecycle")


class ObjectDeleter(Protocol):
    """All the reaper needs from the storage gateway."""

    def delete(self, key: str) -> bool: ...


@dataclass(frozen=True)
class Cursor:
    """Keyset position in (expires_at, id) order: rows that failed this run are not retried in it."""

    expires_at: datetime
    pk: uuid.UUID


@dataclass
class BatchResult:
    selected: int = 0
    deleted: int = 0
    objects_deleted: int = 0
    errors: int = 0
    dead_lettered: int = 0
    would_delete: list[str] = field(default_factory=list)
    error_messages: list[str] = field(default_factory=list)
    cursor: Cursor | None = None


def reapable(now: datetime) -> QuerySet[Attachment]:
    """Expired-staged, discarded or released rows still under the delete-attempt cap, and under no hold.

    The lifecycle filter matches the att_sweep_expiry partial index's predicate;
    the hold test is a column and one probe of the active ref holds per row.
    """
    return Attachment.objects.filter(
        not_held_q(),
        lifecycle__in=REAPABLE,
        expires_at__lte=now,
        delete_attempts__lt=DELETE_ATTEMPTS,
    )


def batch_query(now: datetime, after: Cursor | None, size: int, *, lock: bool, only: Q | None = None) -> QuerySet:
    """One batch in (expires_at, id) order; `only` narrows it (erasure reaps its own files, nothing else)."""
    qs = reapable(now)
    if only is not None:
        qs = qs.filter(only)
    if after is not None:
        qs = qs.filter(
            Q(expires_at__gt=after.expires_at) | Q(expires_at=after.expires_at, pk__gt=after.pk),
            expires_at__gte=after.expires_at,
        )
    if lock:
        qs = qs.select_for_update(skip_locked=connection.features.has_select_for_update_skip_locked)
    columns: tuple[str, ...] = _COLUMNS
    if connection.vendor == "postgresql":
        # Each row brings its derivative keys (an index lookup per row): no second
        # round trip with the batch's 500 ids, a fifth of a batch's time. The subquery
        # sees the statement's snapshot: a derivative committed between it and the row
        # lock (processing still running on an expiring upload) is missed here and
        # removed by reconciliation as a deleted row's leftover.
        qs = qs.annotate(
            derivative_keys=ArraySubquery(Derivative.objects.filter(attachment=OuterRef("pk")).values("storage_key"))
        )
        columns = (*_COLUMNS, "derivative_keys")
    return qs.order_by("expires_at", "pk").values_list(*columns)[:size]


def stored_keys(rows: list[tuple]) -> dict[uuid.UUID, list[str]]:
    """Every key a row stored: original, snapshot, served, quarantine and each derivative (never derived)."""
    keys: dict[uuid.UUID, list[str]] = {
        pk: [k for k in dict.fromkeys((storage_key, content_key, served_key, quarantine_key)) if k]
        for pk, _exp, storage_key, served_key, quarantine_key, _att, content_key, *_ in rows
    }
    derived: Iterable[tuple[Any, Any]]
    if rows and len(rows[0]) > len(_COLUMNS):  # batch_query brought them (PostgreSQL)
        derived = [(row[0], key) for row in rows for key in row[len(_COLUMNS)]]
    else:
        derived = Derivative.objects.filter(attachment_id__in=list(keys)).values_list("attachment_id", "storage_key")
    for attachment_id, key in derived:
        if key and key not in keys[attachment_id]:
            keys[attachment_id].append(key)
    return keys


def _delete_one(gateway: ObjectDeleter, key: str) -> tuple[str, bool, str]:
    try:
        # False ("already gone") is success: the key is the one we stored, so nothing else lives there.
        return key, bool(gateway.delete(key)), ""
    except Exception as exc:  # noqa: BLE001 - any storage failure is retried on the next tick
        return key, False, f"{type(exc).__name__}: {exc}"[:300]


def delete_objects(
    gateway: ObjectDeleter, keys: Sequence[str], pool: Executor, workers: int
) -> dict[str, tuple[bool, str]]:
    """Delete keys with the pool's bounded concurrency; key → (removed, error or "").

    Keys go to the pool in a few slices per worker rather than one task each:
    a future per key costs more than an in-memory or local delete.
    """
    step = max(1, -(-len(keys) // (workers * _SLICES_PER_WORKER)))
    slices = [keys[i : i + step] for i in range(0, len(keys), step)]
    results: dict[str, tuple[bool, str]] = {}
    for done in pool.map(lambda part: [_delete_one(gateway, k) for k in part], slices):
        results.update((key, (removed, error)) for key, removed, error in done)
    return results


def _record_failure(
    pk: uuid.UUID, attempts_before: int, keys: list[str], errors: dict[str, str], now: datetime
) -> bool:
    """Count a failed attempt; at the cap hand the row to a human. True when dead-lettered."""
    attempts = attempts_before + 1
    message = "; ".join(f"{key}: {error}" for key, error in errors.items())[:500]
    attachment_delete_failed(attachment_id=pk, attempts=attempts, error=message, now=now)
    if attempts < DELETE_ATTEMPTS:
        return False
    dead_letter_open(
        kind=DeadLetter.Kind.SWEEP,
        attachment_id=pk,
        storage_key=keys[0] if keys else "",
        last_error=message,
        history=[{"attempt": attempts, "at": now.isoformat(), "error": message}],
        payload={"keys": keys, "failed_keys": sorted(errors), "attempts": attempts},
    )
    log.error("sweep delete dead-lettered", extra={"attachment_id": str(pk), "attempts": attempts, "error": message})
    return True


def abort_uploads(gateway: ObjectDeleter, uploads: dict[uuid.UUID, tuple[str, str]]) -> dict[uuid.UUID, str]:
    """Abort the unfinished multipart uploads of reaped rows (their parts are invisible to listings,
    so nothing else removes them); row → error, "" when aborted or already gone."""
    from attachments.uploads.services.multipart import multipart_abort

    errors = {}
    for pk, (key, upload_id) in uploads.items():
        try:
            multipart_abort(key=key, upload_id=upload_id, gateway=gateway)
            errors[pk] = ""
        except Exception as exc:  # noqa: BLE001 - like a failed delete: retried next tick
            errors[pk] = f"{type(exc).__name__}: {exc}"[:300]
    return errors


def reap_batch(
    *,
    now: datetime,
    after: Cursor | None,
    size: int,
    gateway: ObjectDeleter,
    pool: Executor,
    workers: int,
    only: Q | None = None,
    actor: str = "system:sweep",
) -> BatchResult:
    """Lock, delete and mark one batch (one transaction)."""
    result = BatchResult()
    with transaction.atomic():
        rows = list(batch_query(now, after, size, lock=True, only=only))
        if not rows:
            return result
        result.selected = len(rows)
        result.cursor = Cursor(rows[-1][1], rows[-1][0])
        keys = stored_keys(rows)
        aborted = abort_uploads(gateway, {row[0]: (row[2], row[_UPLOAD_ID]) for row in rows if row[_UPLOAD_ID]})
        outcome = delete_objects(gateway, [k for ks in keys.values() for k in ks], pool, workers)
        done: list[uuid.UUID] = []
        for pk, _exp, _sk, _srv, _qk, attempts, *_ in rows:
            errors = {k: outcome[k][1] for k in keys[pk] if outcome[k][1]}
            if aborted.get(pk):
                errors["multipart upload"] = aborted[pk]
            result.objects_deleted += sum(1 for k in keys[pk] if outcome[k][0])
            if not errors:
                done.append(pk)
                continue
            result.errors += 1
            result.error_messages.append(f"{pk}: " + "; ".join(errors.values()))
            if _record_failure(pk, attempts, keys[pk], errors, now):
                result.dead_lettered += 1
        if done:
            # The rows are locked by this transaction: every one in `done` is marked.
            lifecycle = {row[0]: row[_LIFECYCLE] for row in rows}
            result.deleted = attachments_mark_deleted(
                before={pk: lifecycle[pk] for pk in done}, now=now, actor=actor, event="sweep_delete"
            )
    return result


def preview_batch(*, now: datetime, after: Cursor | None, size: int) -> BatchResult:
    """Dry run: what one batch would delete. Nothing is locked, deleted or changed."""
    result = BatchResult()
    rows = list(batch_query(now, after, size, lock=False))
    if not rows:
        return result
    result.selected = len(rows)
    result.cursor = Cursor(rows[-1][1], rows[-1][0])
    for pk, keys in stored_keys(rows).items():
        for key in keys:
            log.info("sweep dry-run: would delete", extra={"attachment_id": str(pk), "key": key})
            result.would_delete.append(key)
    return result
