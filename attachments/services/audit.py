"""Audit events that change neither status nor lifecycle: the intent, the bytes arriving, each scan, heartbeats.

They go to the same table as transitions and lifecycle changes (TransitionLog),
so one timeline tells a file's story in order. Their from/to stay empty: those
columns say what changed, and readers that count changes (the dashboard's
timeline) must not count an event. Each event's facts go in `details`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from ..models import Attachment, TransitionLog

INTENT, ARRIVED, SCAN, HEARTBEAT = "intent", "arrived", "scan", "heartbeat"
STAFF_DOWNLOAD = "staff_download"  # a staff member took the file's bytes out of the console
VARIANTS_PURGED = "variants_purged"  # staff dropped the file's named variants (variants/services/purge.py)
# A video's web rendition made or given up, and its original removed once the location-free
# copy was the one stored copy (services/renditions.py): the original's SHA-256 stays here.
RENDITION_READY, RENDITION_FAILED, ORIGINAL_REMOVED = "rendition_ready", "rendition_failed", "original_removed"
ARCHIVED = "archived"  # the file went out in a ZIP of its ref (api/archive.py); one archive id for all
AUDIT_EVENTS = (
    INTENT,
    ARRIVED,
    SCAN,
    HEARTBEAT,
    STAFF_DOWNLOAD,
    VARIANTS_PURGED,
    RENDITION_READY,
    RENDITION_FAILED,
    ORIGINAL_REMOVED,
    ARCHIVED,
)

# A client may heartbeat every minute: an extension is recorded when it gains a new hour of expiry,
# and the file keeps one heartbeat row, folding each recorded extension into it (heartbeats_record):
# when they began, how many, the expiry before the first and after the last. A draft heartbeated
# for as long as its hard cap allows still has one heartbeat row, whatever the client's rhythm.
HEARTBEAT_AUDIT_GRANULARITY = timedelta(hours=1)

# What a pipeline stage's facts say about an event: stage → (event, the facts it keeps).
_STAGE_EVENTS = {
    # Intake recorded its facts only if a declared digest matched the bytes: that digest is theirs.
    "intake": (
        ARRIVED,
        lambda f, row: {
            "stored_size": f.get("stored_size"),
            "content_type": f.get("content_type"),
            "sha256": row.declared_sha256,
        },
    ),
    # Whatever the scan step reports in its metadata (today its duration; scanner
    # names and signature versions join here as the step starts reporting them).
    SCAN: (SCAN, lambda f, row: dict((f.get("metadata") or {}).get("scan") or {})),
}


# A file waiting for a dependency that is down is handed back every 5-15 s (services/processing.py):
# each try writes its start (and the intake's `arrived`) and its release. The file keeps one
# release row for the whole wait, as it keeps one heartbeat row: each new wait folds the rows of
# the try before it into the new release (dependency_waits_fold), which says since when and how often.
WAIT_NOTE_PREFIX = "waiting for "
# What a try that ended in another wait wrote after the previous release (intake runs the scan: its row too).
_RETRY_ROWS = ("start", ARRIVED, SCAN)
_FOLD_LOOKBACK = 6


def dependency_waits_fold(attachment_id: Any) -> dict[str, Any]:
    """Drop the rows of the file's previous wait for a dependency (its release, and the try after it); the
    `details` its new release row carries: the first wait's time (`since`) and how many waits (`waits`).

    Only when nothing else happened since that release (the try only started and
    was handed back again); otherwise the new release starts its own count. Run
    under the row's lock, before the new release is written.
    """
    recent = list(
        TransitionLog.objects.filter(attachment_id=attachment_id)
        .order_by("-id")
        .values_list("id", "transition", "actor", "message", "details", "created_at")[:_FOLD_LOOKBACK]
    )
    fold: list[int] = []
    for pk, transition, actor, message, details, created_at in recent:
        if transition in _RETRY_ROWS and actor == "worker":
            fold.append(pk)
            continue
        if transition == "release" and actor == "worker" and message.startswith(WAIT_NOTE_PREFIX) and fold:
            TransitionLog.objects.filter(pk__in=[*fold, pk]).delete()
            return {
                "since": (details or {}).get("since") or created_at.isoformat(),
                "waits": int((details or {}).get("waits", 1)) + 1,
            }
        break
    return {"waits": 1}


def audit_entry(
    attachment_id: Any, *, event: str, actor: str, details: Mapping[str, Any] | None = None, message: str = ""
) -> TransitionLog:
    """An unsaved audit row for one event (callers save it with the change it records, or in bulk)."""
    if event not in AUDIT_EVENTS:
        raise ValueError(f"unknown audit event {event!r}")
    return TransitionLog(
        attachment_id=attachment_id,
        transition=event,
        from_status="",
        to_status="",
        actor=actor[:150],
        message=message[:500],
        details={k: v for k, v in (details or {}).items() if v not in (None, "")},
    )


def stage_entry(attachment: Attachment, *, stage: str, fields: Mapping[str, Any], actor: str) -> TransitionLog | None:
    """The unsaved audit row a pipeline stage's recorded facts stand for (intake: bytes arrived; scan: the scan)."""
    found = _STAGE_EVENTS.get(stage)
    if found is None:
        return None
    event, keep = found
    return audit_entry(attachment.pk, event=event, actor=actor, details=keep(fields, attachment))


def heartbeat_entries(extended: Iterable[tuple[Any, datetime | None, datetime]], *, actor: str) -> list[TransitionLog]:
    """Audit rows for heartbeat extensions (id, expiry before, expiry after) that gained a new hour."""
    step = HEARTBEAT_AUDIT_GRANULARITY.total_seconds()
    return [
        audit_entry(
            pk,
            event=HEARTBEAT,
            actor=actor,
            details={"expires_at": after.isoformat(), "was": before.isoformat() if before else None},
        )
        for pk, before, after in extended
        if before is None or before.timestamp() // step != after.timestamp() // step
    ]


def heartbeats_record(entries: list[TransitionLog]) -> None:
    """Save heartbeat entries, each replacing its file's earlier heartbeat row with one that sums both.

    The replacement is appended (a DELETE, then one INSERT for all), so the row
    sits where the latest extension happened in the timeline and ids still grow
    with time. Only runs when an extension gained a new hour: at most hourly per file.
    """
    if not entries:
        return
    ids = [entry.attachment_id for entry in entries]
    earlier = {
        pk: (details, created_at)
        for pk, details, created_at in TransitionLog.objects.filter(attachment_id__in=ids, transition=HEARTBEAT)
        .order_by("created_at", "id")
        .values_list("attachment_id", "details", "created_at")
    }
    for entry in entries:
        found = earlier.get(entry.attachment_id)
        details = found[0] if found else {}
        entry.details = {
            **entry.details,
            "since": details.get("since") or (found[1].isoformat() if found else None),
            "count": int(details.get("count", 1)) + 1 if found else 1,
            "was": details.get("was") if found else entry.details.get("was"),
        }
        entry.details = {k: v for k, v in entry.details.items() if v is not None}
    if earlier:
        TransitionLog.objects.filter(attachment_id__in=list(earlier), transition=HEARTBEAT).delete()
    TransitionLog.objects.bulk_create(entries)


def attachment_staff_download_record(*, attachment_id: Any, actor: str, size: int) -> TransitionLog:
    """Append the audit row for a staff download: who took which file's bytes, on the file's own timeline."""
    entry = audit_entry(attachment_id, event=STAFF_DOWNLOAD, actor=actor, details={"size": size})
    entry.save()
    return entry


def ref_archive_record(*, attachments: list[Attachment], ref: str, actor: str, size: int, renditions: str = "") -> str:
    """Record one archive of a ref: a row on each file's timeline sharing the archive's id (one INSERT).

    `renditions` ("web") when videos went out as their web rendition. Returns the
    archive id, which the response carries (`X-Archive-Id`) for support.
    """
    archive_id = str(uuid.uuid4())
    details: dict[str, Any] = {"archive": archive_id, "ref": ref, "files": len(attachments), "bytes": size}
    if renditions:
        details["renditions"] = renditions
    TransitionLog.objects.bulk_create(
        [audit_entry(a.pk, event=ARCHIVED, actor=actor, details=details) for a in attachments]
    )
    return archive_id
