"""Hard delete: attachment rows leave the database here, and only here, each leaving a tombstone.

The tombstone keeps the file's identity, digest, final state and times, and its
whole audit timeline (the TransitionLog rows cascade with the row), for
AIRLOCK_RETENTION_DAYS.tombstones (sweeper/retention.py purges it after). Every
event is kept, in order; the size stays bounded in two ways: a run of the same
event repeated in a row (the same change by the same actor: clean rescans,
say) is one entry with its `count` and the time of the last (`until`), and an
entry's details longer than TOMBSTONE_DETAILS_BYTES are replaced by their size.
Per batch: one SELECT of the rows, one of their history, one INSERT of the
tombstones, then the DELETE: nothing per row (per-row writes would cost the
sweeper most of its throughput).
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from ..models import Attachment, Tombstone, TransitionLog

# An entry's details (what a scan reported, an intake's facts) up to this size, as JSON, are kept;
# larger ones are replaced by {"omitted_bytes": n}.
TOMBSTONE_DETAILS_BYTES = 1024

_COLUMNS = (
    "id",
    "tenant_id",
    "tenant__slug",
    "owner_id",
    "subject",
    "profile",
    "storage_key",
    "sha256",
    "size",
    "status",
    "reason_code",
    "reason_message",
    "lifecycle",
    "created_at",
    "ready_at",
    "committed_at",
    "deleted_at",
)


def _same_run(entry: dict[str, Any], last: dict[str, Any]) -> bool:
    keys = ("event", "from", "to", "actor", "reason")
    return all(entry.get(k) == last.get(k) for k in keys)


def _compact(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every entry in order, a repeated run folded into its first entry (count, until), big details sized."""
    kept: list[dict[str, Any]] = []
    for entry in entries:
        details = entry.get("details")
        if details:
            size = len(json.dumps(details, separators=(",", ":"), default=str))
            if size > TOMBSTONE_DETAILS_BYTES:
                entry["details"] = {"omitted_bytes": size}
        if kept and _same_run(entry, kept[-1]):
            kept[-1]["count"] = kept[-1].get("count", 1) + 1
            kept[-1]["until"] = entry["at"]
            continue
        kept.append(entry)
    return kept


def _histories(ids: list[Any]) -> dict[Any, list[dict[str, Any]]]:
    found: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    rows = (
        TransitionLog.objects.filter(attachment_id__in=ids)
        .order_by("attachment_id", "created_at", "id")
        .values_list(
            "attachment_id", "created_at", "transition", "from_status", "to_status", "actor", "reason_code", "details"
        )
    )
    for pk, at, event, before, after, actor, reason, details in rows:
        entry: dict[str, Any] = {"at": at.isoformat(), "event": event, "from": before, "to": after, "actor": actor}
        if reason:
            entry["reason"] = reason
        if details:
            entry["details"] = details
        found[pk].append(entry)
    return found


def attachments_hard_delete(*, rows: QuerySet[Attachment], actor: str, now: datetime) -> int:
    """Delete the selected rows for good (derivatives and history with them), leaving one tombstone each.

    `rows` is the caller's selection (its rule: what is past the audit window,
    what was refused); it is read and deleted in this transaction. Returns the
    attachment rows deleted.
    """
    with transaction.atomic():
        selected = list(rows.select_for_update(of=("self",)).order_by("pk").values(*_COLUMNS))
        if not selected:
            return 0
        ids = [row["id"] for row in selected]
        histories = _histories(ids)
        Tombstone.objects.bulk_create(
            [
                Tombstone(
                    attachment_id=row["id"],
                    tenant_id=row["tenant_id"],
                    tenant_slug=row["tenant__slug"],
                    owner_id=row["owner_id"],
                    subject=row["subject"],
                    profile=row["profile"],
                    storage_key=row["storage_key"],
                    sha256=row["sha256"],
                    size=row["size"],
                    status=row["status"],
                    reason_code=row["reason_code"],
                    reason_message=row["reason_message"],
                    lifecycle=row["lifecycle"],
                    created_at=row["created_at"],
                    ready_at=row["ready_at"],
                    committed_at=row["committed_at"],
                    deleted_at=row["deleted_at"],
                    purged_at=now,
                    purged_by=actor[:150],
                    history=_compact(histories.get(row["id"], [])),
                    history_total=len(histories.get(row["id"], [])),
                )
                for row in selected
            ]
        )
        _count, per_model = Attachment.objects.filter(pk__in=ids).delete()
    return per_model.get(Attachment._meta.label, 0)
