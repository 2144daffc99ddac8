"""Reconcile's other direction: ready files whose objects are gone from storage.

How objects are checked: list and diff, then HEAD only the candidates.
Reconcile already lists every object under tenants/ for the storage → rows
direction; keeping what it saw costs no request, while a HEAD per key costs
about three requests per ready file (original, served rendition, thumbnail).
LIST returns 1,000 keys a request: for a million files, ~3,000 LISTs against
~3,000,000 HEADs. The listing is a snapshot taken while rows keep changing,
so a key absent from it is only a candidate: one HEAD confirms it before
anything is reported or done (an object written after the listing passed its
place is never reported missing).

Rows are walked by primary key in batches (keyset pagination: each batch is
one index range, however far the walk got), with their derivatives in one
query per batch. A row whose original is gone becomes failed/object_missing;
a row with only derivatives gone keeps being served and has them made again
(processing's `rederive` job). A named variant is a cache made on request, which
`rederive` does not make: a variant row whose object is gone is dropped instead
(the next request for it makes it again). All obey the sweeper's brakes, read per batch.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from attachments.models import Derivative
from attachments.retention.services.missing_objects import (
    attachment_fail_missing,
    attachment_rederive_request,
    attachment_variants_drop_missing,
)
from attachments.selectors import ready_files_in_storage
from attachments.storage.base import StorageGateway
from attachments.variants.services.purge import VARIANT_KIND_PREFIX

ACTOR = "system:reconcile"
BATCH_SIZE = 500


class ListedKeys:
    """The keys a listing returned, kept as their hashes.

    For a million derivative keys a set of the strings holds about 164 MB (the
    strings 130 MB, the table 34 MB), a set of their hash() ints about 70 MB. A
    collision (~n²/2⁶⁴) could only hide a missing object until the next run
    (hash() is seeded per process); it never reports a present one missing.
    """

    def __init__(self) -> None:
        self._hashes: set[int] = set()

    def add(self, key: str) -> None:
        self._hashes.add(hash(key))

    def __contains__(self, key: object) -> bool:
        return hash(key) in self._hashes

    def __len__(self) -> int:
        return len(self._hashes)


@dataclass(frozen=True)
class ExpectedObjects:
    """What a ready row says storage holds: its original and every derivative (the served rendition among them)."""

    attachment_id: uuid.UUID
    original: str
    derivatives: tuple[str, ...]
    variants: tuple[str, ...] = ()  # named variants' keys: made on request, dropped when gone


class Context(Protocol):
    """What the walk needs of the reconcile run it is part of."""

    gateway: StorageGateway

    @property
    def brake(self) -> str: ...

    def check_brakes(self) -> None: ...

    def keep_going(self) -> bool: ...

    def record(self, kind: str, key: str, action: str, attachment_id: uuid.UUID | None, detail: str = "") -> None: ...


def ready_batches(*, now: datetime, batch_size: int | None = None) -> Iterator[list[ExpectedObjects]]:
    """Ready rows and the keys they expect, in primary-key order, `batch_size` rows at a time."""
    batch_size = batch_size or BATCH_SIZE
    last: uuid.UUID | None = None
    while True:
        rows = ready_files_in_storage(now=now)
        if last is not None:
            rows = rows.filter(pk__gt=last)
        batch = list(rows.order_by("pk").values_list("pk", "storage_key", "content_key", "served_key")[:batch_size])
        if not batch:
            return
        derived: dict[uuid.UUID, list[str]] = {}
        variants: dict[uuid.UUID, list[str]] = {}
        for attachment_id, key, kind in Derivative.objects.filter(
            attachment_id__in=[row[0] for row in batch]
        ).values_list("attachment_id", "storage_key", "kind"):
            (variants if kind.startswith(VARIANT_KIND_PREFIX) else derived).setdefault(attachment_id, []).append(key)
        expected = []
        for pk, storage_key, content_key, served_key in batch:
            original = content_key or storage_key
            # A served rendition (a HEIC's JPEG, a sanitized image) is a derivative key; else it is the original.
            others = {*derived.get(pk, ()), served_key} - {original, ""}
            expected.append(ExpectedObjects(pk, original, tuple(sorted(others)), tuple(sorted(variants.get(pk, ())))))
        yield expected
        last = batch[-1][0]


def check_ready_files(ctx: Context, listed: ListedKeys, *, now: datetime, batch_size: int | None = None) -> int:
    """Find ready rows whose objects are gone and fail or re-derive them; return how many rows were checked."""
    checked = 0
    for batch in ready_batches(now=now, batch_size=batch_size):
        if not ctx.keep_going():
            break
        ctx.check_brakes()
        checked += len(batch)
        for row in batch:
            _check_row(ctx, listed, row)
    return checked


def _gone(ctx: Context, listed: ListedKeys, key: str) -> bool:
    # Absent from the listing is a candidate; only storage's own answer now makes it missing.
    return key not in listed and ctx.gateway.head(key) is None


def _check_row(ctx: Context, listed: ListedKeys, row: ExpectedObjects) -> None:
    if _gone(ctx, listed, row.original):
        action = _held(ctx, "would_fail")
        if not action:
            done = attachment_fail_missing(attachment_id=row.attachment_id, working_key=row.original, actor=ACTOR)
            action = "failed" if done else "skipped"
        ctx.record("missing_original", row.original, action, row.attachment_id)
        return
    gone_variants = [key for key in row.variants if _gone(ctx, listed, key)]
    if gone_variants:
        action = _held(ctx, "would_drop")
        if not action:
            dropped = attachment_variants_drop_missing(attachment_id=row.attachment_id, keys=gone_variants)
            action = "dropped" if dropped else "skipped"
        for key in gone_variants:
            ctx.record("missing_variant", key, action, row.attachment_id)
    missing = [key for key in row.derivatives if _gone(ctx, listed, key)]
    if not missing:
        return
    action = _held(ctx, "would_regenerate")
    if not action:
        queued = attachment_rederive_request(attachment_id=row.attachment_id, working_key=row.original)
        action = "regenerating" if queued else "skipped"
    for key in missing:
        ctx.record("missing_derivative", key, action, row.attachment_id)


def _held(ctx: Context, would: str) -> str:
    """The action to report instead of acting, under a brake; "" when free to act."""
    if ctx.brake == "killswitch":
        return "kept"
    return would if ctx.brake else ""
