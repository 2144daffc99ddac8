"""Per-tenant quotas: what a tenant holds, and refusing an intent that would hold more.

A file counts while it may still be served or become servable: status
pending, processing or ready, lifecycle staged or committed. It counts its
declared size until storage has told us the real one (``stored_size``, set at
intake), then that. Rejected, failed, discarded and deleted files stop
counting in the transaction that makes them so.

Usage lives in one counter row per tenant (``TenantUsage``), moved in the same
transaction as every change that starts or stops a file counting:

* an intent (or upload-through, or tus creation) reserves room with one
  conditional ``UPDATE … WHERE bytes_used <= limit - size`` (``quota_reserve``;
  on PostgreSQL folded into the INSERT's statement,
  attachments/uploads/services/fastpath_insert.py):
  the row lock it takes serialises a tenant's intents until commit, and
  PostgreSQL re-checks the condition on the newest row version, so two
  intents can never both take the last room;
* a transition or a stored size (``apply_transition``/``save_fields``) and
  the bulk lifecycle changes (discard, replace, sweep: ``usage_release``)
  move it by their delta, always after their attachment rows are locked, so
  the counter is the last lock any transaction takes.

Why not sum the tenant's files under a lock at each intent: on PostgreSQL,
summing tens of thousands of a tenant's live files takes longer than a whole
intent even with a covering partial index, and grows with the tenant; the
counter costs one indexed UPDATE whatever the size (bench/quotas_bench.py
measures both). ``tenant_usage_recount`` rebuilds a counter
from the rows (exact even under concurrent changes, see its docstring).

Per subject (optional: AIRLOCK_SUBJECT_QUOTA, unset = no limit),
the same again one level down: a ``SubjectUsage`` row per (tenant, subject),
reserved by a conditional UPDATE right after the tenant's and moved by every
change right after the tenant's counter, so the tenant counter's row lock
(taken first by every mover) also serialises a subject's counter and its
creation from the rows. Subject counters are kept only while a subject quota
is set: without one an intent and a transition run no statement more, and the
one-statement intent (fastpath_insert.py) is used; with one, the intent takes
the transaction path. A counter left from an earlier period with a subject
quota is stale: ``tenant_usage_recount`` drops the tenant's subject counters,
which are rebuilt from the rows when next needed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Q, QuerySet, Sum
from django.db.models.functions import Coalesce

from ..errors import QuotaExceeded
from ..models import Attachment, Lifecycle, Status, SubjectUsage, Tenant, TenantUsage

log = logging.getLogger("airlock.quotas")

COUNTED_STATUSES = (Status.PENDING, Status.PROCESSING, Status.READY)
# A released file still holds its bytes (restorable within the grace): it counts until swept.
COUNTED_LIFECYCLES = (Lifecycle.STAGED, Lifecycle.COMMITTED, Lifecycle.RELEASED)
# The columns that decide whether and how much a row counts.
USAGE_FIELDS = ("status", "lifecycle", "stored_size", "declared_size")


@dataclass(frozen=True)
class Usage:
    bytes_used: int
    bytes_limit: int | None
    files_used: int
    files_limit: int | None


def counted_q() -> Q:
    return Q(status__in=COUNTED_STATUSES, lifecycle__in=COUNTED_LIFECYCLES)


def _size_expr() -> Coalesce:
    return Coalesce("stored_size", "declared_size")


def tenant_limits(tenant: Tenant) -> tuple[int | None, int | None]:
    """(bytes, files) this tenant may hold; None = unlimited."""
    limit_bytes = tenant.quota_bytes if tenant.quota_bytes is not None else settings.AIRLOCK_TENANT_QUOTA.bytes
    limit_files = tenant.quota_files if tenant.quota_files is not None else settings.AIRLOCK_TENANT_QUOTA.files
    return limit_bytes, limit_files


def subject_limits() -> tuple[int | None, int | None]:
    """(bytes, files) one subject of any tenant may hold; None = unlimited."""
    return settings.AIRLOCK_SUBJECT_QUOTA.bytes, settings.AIRLOCK_SUBJECT_QUOTA.files


def subject_quota_on() -> bool:
    """Whether subject counters are kept (a subject quota is set)."""
    return subject_limits() != (None, None)


# --- reading ------------------------------------------------------------------------


def tenant_usage(*, tenant: Tenant) -> Usage:
    """The tenant's usage and limits (GET /usage, the admin)."""
    row: tuple[int, int] | None
    if Tenant.usage.is_cached(tenant):  # select_related("usage"): the admin's list, no query per row
        counter = getattr(tenant, "usage", None)
        row = (counter.bytes_used, counter.files_used) if counter is not None else None
    else:  # read fresh: `tenant.usage` would cache the counter on a tenant that outlives this call
        row = TenantUsage.objects.filter(tenant_id=tenant.pk).values_list("bytes_used", "files_used").first()
    if row is None:
        row = _counter_create(tenant.pk) or (0, 0)  # without created_only it returns the counter
    limit_bytes, limit_files = tenant_limits(tenant)
    return Usage(bytes_used=row[0], bytes_limit=limit_bytes, files_used=row[1], files_limit=limit_files)


def usage_recounted(tenant_id: Any) -> tuple[int, int]:
    """(bytes, files) summed from the attachment rows (as this transaction sees them)."""
    totals = Attachment.objects.filter(counted_q(), tenant_id=tenant_id).aggregate(b=Sum(_size_expr()), n=Count("pk"))
    return int(totals["b"] or 0), int(totals["n"] or 0)


# --- the intent's check ----------------------------------------------------------------


def counter_with_room(tenant: Tenant, size: int) -> QuerySet[TenantUsage]:
    """The tenant's counter row, if it has room for one more file of `size` bytes."""
    limit_bytes, limit_files = tenant_limits(tenant)
    rows = TenantUsage.objects.filter(tenant_id=tenant.pk)
    if limit_bytes is not None:
        rows = rows.filter(bytes_used__lte=limit_bytes - size)
    if limit_files is not None:
        rows = rows.filter(files_used__lte=limit_files - 1)
    return rows


def room_taken(size: int) -> dict[str, Any]:
    return {"bytes_used": F("bytes_used") + size, "files_used": F("files_used") + 1}


def quota_reserve(*, tenant: Tenant, size: int, subject: str | None = None) -> None:
    """Take room for one file of `size` bytes, or raise QuotaExceeded (inside the intent's transaction).

    The success path is one UPDATE (two with a subject quota): it holds the
    counter row until the intent commits, so concurrent intents of the tenant
    queue here and each sees the room the previous one took. `subject`: the
    new file's, checked against the subject quota when one is set.
    """
    _tenant_reserve(tenant, size)
    if subject is not None and subject_quota_on():
        _subject_reserve(tenant.pk, subject, size)


def _tenant_reserve(tenant: Tenant, size: int) -> None:
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("quota_reserve runs in the transaction that inserts the attachment")
    limit_bytes, limit_files = tenant_limits(tenant)
    while True:
        if counter_with_room(tenant, size).update(**room_taken(size)):
            return
        # Refused, or no counter yet. Read it under its lock: what we read stays true until we answer.
        current = (
            TenantUsage.objects.select_for_update()
            .filter(tenant_id=tenant.pk)
            .values_list("bytes_used", "files_used")
            .first()
        )
        if current is None:
            _counter_create(tenant.pk)  # a tenant from before quotas; then try again
            continue
        used_bytes, used_files = current
        if limit_files is not None and used_files + 1 > limit_files:
            raise QuotaExceeded(
                f"The tenant holds {used_files} of its {limit_files} files.",
                details={"quota": "files", "used": used_files, "limit": limit_files, "requested": 1},
            )
        if limit_bytes is not None and used_bytes + size > limit_bytes:
            raise QuotaExceeded(
                f"{size} more bytes would pass the tenant's {limit_bytes} bytes ({used_bytes} used).",
                details={"quota": "bytes", "used": used_bytes, "limit": limit_bytes, "requested": size},
            )
        # Room was freed between the UPDATE and the read (the lock is ours now): take it.


def _subject_counter(tenant_id: Any, subject: str) -> QuerySet[SubjectUsage]:
    return SubjectUsage.objects.filter(tenant_id=tenant_id, subject=subject)


def _subject_reserve(tenant_id: Any, subject: str, size: int) -> None:
    """The subject's part of quota_reserve, under the tenant counter's lock (taken just before)."""
    limit_bytes, limit_files = subject_limits()
    while True:
        rows = _subject_counter(tenant_id, subject)
        if limit_bytes is not None:
            rows = rows.filter(bytes_used__lte=limit_bytes - size)
        if limit_files is not None:
            rows = rows.filter(files_used__lte=limit_files - 1)
        if rows.update(**room_taken(size)):
            return
        current = _subject_counter(tenant_id, subject).values_list("bytes_used", "files_used").first()
        if current is None:
            _subject_counter_create(tenant_id, subject)  # first file while a subject quota is set
            continue
        used_bytes, used_files = current
        if limit_files is not None and used_files + 1 > limit_files:
            raise QuotaExceeded(
                f"Subject {subject!r} holds {used_files} of its {limit_files} files.",
                details={
                    "quota": "files",
                    "subject": subject,
                    "used": used_files,
                    "limit": limit_files,
                    "requested": 1,
                },
            )
        if limit_bytes is not None and used_bytes + size > limit_bytes:
            raise QuotaExceeded(
                f"{size} more bytes would pass subject {subject!r}'s {limit_bytes} bytes ({used_bytes} used).",
                details={
                    "quota": "bytes",
                    "subject": subject,
                    "used": used_bytes,
                    "limit": limit_bytes,
                    "requested": size,
                },
            )


def _subject_counter_create(tenant_id: Any, subject: str) -> None:
    """Create a subject's missing counter from its rows (the caller holds the tenant counter's lock).

    Every transaction that moves a subject counter has moved its tenant's
    counter first, so none of them is half-way while this counts: a change
    written but not committed by another transaction is not in the rows read
    here and moves the counter itself once it exists.
    """
    totals = Attachment.objects.filter(counted_q(), tenant_id=tenant_id, subject=subject).aggregate(
        b=Sum(_size_expr()), n=Count("pk")
    )
    try:
        with transaction.atomic():
            SubjectUsage.objects.create(
                tenant_id=tenant_id, subject=subject, bytes_used=int(totals["b"] or 0), files_used=int(totals["n"] or 0)
            )
    except IntegrityError:
        pass  # created meanwhile (a tenant without a counter row takes no lock): it is exact too


# --- keeping the counter ---------------------------------------------------------------


def usage_snapshot(attachment: Attachment) -> dict[str, Any]:
    """The usage columns as loaded on this instance (the `before` of usage_delta)."""
    return _loaded(attachment)


def _loaded(attachment: Attachment) -> dict[str, Any]:
    """The usage columns this instance holds (read or set; a deferred one is neither), without a query."""
    deferred = attachment.get_deferred_fields()
    return {name: getattr(attachment, name) for name in USAGE_FIELDS if name not in deferred}


_UNKNOWN = object()


def usage_delta(attachment: Attachment, *, before: Mapping[str, Any]) -> tuple[int, int]:
    """(bytes, files) the counter moves by when `attachment`, loaded as `before`, is saved as it is now.

    Call it before the save: a column set on the instance without having been
    read (so not in `before`) is read from the row, which still holds the old value.
    """
    values = _loaded(attachment)
    blind = [name for name in USAGE_FIELDS if name not in before and name in values]
    old: dict[str, Any] = dict(before)
    if blind:
        stored = Attachment.objects.filter(pk=attachment.pk).values_list(*blind).first()
        if stored is not None:
            old.update(zip(blind, stored))

    def old_value(name: str) -> Any:
        if name not in old:  # neither read nor set: unchanged, load it now
            old[name] = getattr(attachment, name)
        return old[name]

    def new_value(name: str) -> Any:
        return values[name] if name in values else old_value(name)

    def changed(name: str) -> bool:
        return name in values and values[name] != old.get(name, _UNKNOWN)

    # The common case first, reading nothing more: a transition that neither starts nor
    # stops the file counting (pending → processing → ready), sizes and lifecycle untouched.
    if (old_value("status") in COUNTED_STATUSES) == (new_value("status") in COUNTED_STATUSES) and not any(
        changed(name) for name in ("lifecycle", "stored_size", "declared_size")
    ):
        return 0, 0
    was = old_value("status") in COUNTED_STATUSES and old_value("lifecycle") in COUNTED_LIFECYCLES
    now = new_value("status") in COUNTED_STATUSES and new_value("lifecycle") in COUNTED_LIFECYCLES
    if not was and not now:
        return 0, 0

    def size(value: Any) -> int:
        stored = value("stored_size")
        return int(stored if stored is not None else value("declared_size"))

    return (size(new_value) if now else 0) - (size(old_value) if was else 0), int(now) - int(was)


def usage_move(attachment: Attachment, delta: tuple[int, int], *, change_written: bool) -> None:
    """usage_apply for one attachment: its tenant's counter, and its subject's when a subject quota is set."""
    if not delta[0] and not delta[1]:
        return
    usage_apply(
        attachment.tenant_id,
        delta,
        change_written=change_written,
        subject=attachment.subject if subject_quota_on() else None,  # read only when needed: it may be deferred
    )


def usage_apply(tenant_id: Any, delta: tuple[int, int], *, change_written: bool, subject: str | None = None) -> None:
    """Move a tenant's counter (then `subject`'s, if given) by `delta`; `change_written`: the rows show the change."""
    moved_bytes, moved_files = delta
    if not moved_bytes and not moved_files:
        return
    updated = TenantUsage.objects.filter(tenant_id=tenant_id).update(
        bytes_used=F("bytes_used") + moved_bytes, files_used=F("files_used") + moved_files
    )
    if not updated:
        # No counter yet (a tenant from before quotas): counting the rows includes
        # this transaction's own change once it is written.
        if _counter_create(tenant_id, created_only=True) is None or not change_written:
            usage_apply(tenant_id, delta, change_written=change_written)
    if subject is not None:
        _subject_apply(tenant_id, subject, delta, change_written=change_written)


def _subject_apply(tenant_id: Any, subject: str, delta: tuple[int, int], *, change_written: bool) -> None:
    moved = {"bytes_used": F("bytes_used") + delta[0], "files_used": F("files_used") + delta[1]}
    if _subject_counter(tenant_id, subject).update(**moved):
        return
    _subject_counter_create(tenant_id, subject)
    if not change_written:  # the rows read did not show this change yet
        _subject_counter(tenant_id, subject).update(**moved)


def usage_release(rows: QuerySet[Attachment]) -> None:
    """Stop counting `rows` (locked by the caller): call it just before the change that discards or deletes them."""
    counted = rows.filter(counted_q()).order_by()
    if not subject_quota_on():
        totals = counted.values_list("tenant_id").annotate(b=Sum(_size_expr()), n=Count("pk"))
        for tenant_id, moved_bytes, moved_files in sorted(totals, key=lambda t: t[0]):  # counters in one order
            usage_apply(tenant_id, (-int(moved_bytes or 0), -moved_files), change_written=False)
        return
    by_subject = counted.values_list("tenant_id", "subject").annotate(b=Sum(_size_expr()), n=Count("pk"))
    for tenant_id, subject, moved_bytes, moved_files in sorted(by_subject, key=lambda t: (t[0], t[1])):
        usage_apply(tenant_id, (-int(moved_bytes or 0), -moved_files), change_written=False, subject=subject)


def _counter_create(tenant_id: Any, *, created_only: bool = False) -> tuple[int, int] | None:
    """Create a tenant's missing counter from its rows; None when another transaction created it first.

    The tenant row is locked first so two creators take turns. A change that
    another transaction has written but not committed is not counted here, and
    that transaction adds its own delta once the counter exists.
    """
    with transaction.atomic():
        list(Tenant.objects.select_for_update(no_key=True).filter(pk=tenant_id).values_list("pk"))
        existing = TenantUsage.objects.filter(tenant_id=tenant_id).values_list("bytes_used", "files_used").first()
        if existing is not None:
            return None if created_only else existing
        used = usage_recounted(tenant_id)
        try:
            with transaction.atomic():
                TenantUsage.objects.create(tenant_id=tenant_id, bytes_used=used[0], files_used=used[1])
        except IntegrityError:
            return (
                None
                if created_only
                else TenantUsage.objects.filter(tenant_id=tenant_id).values_list("bytes_used", "files_used").get()
            )
        return used


def tenant_usage_recount(*, tenant_id: Any) -> tuple[tuple[int, int], tuple[int, int]]:
    """Set a tenant's counter to the sum of its rows; return (before, after).

    Exact while files keep changing: the counter row is locked first, so a
    change already counted in it has committed before the rows are read, and
    one not yet counted adds its delta after this commits.
    """
    with transaction.atomic():
        row = (
            TenantUsage.objects.select_for_update()
            .filter(tenant_id=tenant_id)
            .values_list("bytes_used", "files_used")
            .first()
        )
        # Under the counter's lock no subject counter of the tenant moves: dropped, each is
        # rebuilt from the rows when next needed (exact, and never stale from a period without them).
        SubjectUsage.objects.filter(tenant_id=tenant_id).delete()
        if row is None:
            created = _counter_create(tenant_id)
            return (0, 0), created or (0, 0)
        before = (row[0], row[1])
        used = usage_recounted(tenant_id)
        if used != before:
            TenantUsage.objects.filter(tenant_id=tenant_id).update(bytes_used=used[0], files_used=used[1])
            log.warning(
                "tenant usage recounted", extra={"tenant": str(tenant_id), "before": list(row), "after": list(used)}
            )
        return before, used
