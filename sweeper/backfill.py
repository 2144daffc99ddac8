"""Backfill: re-run processing for a selection of attachments, resumably.

Without ``rescan`` only attachments missing something their profile promises
are selected (an image without a thumbnail, a document without a page count,
an archive without its entry count). Each batch goes back to pending through
``attachments_reprocess`` (ready: rescan; failed: retry), whose intake jobs go
out through the outbox in the same transaction as the checkpoint, so an
interrupted run resumes exactly after the last row it handled.

With ``rescan`` (new scanner rules) the selected ready files are flagged for the
background rescan instead (sweeper/rescans.py): they stay ready and served while
they are scanned again, and only a new hit takes one down.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from attachments.models import Attachment, Derivative, Lifecycle, Status
from attachments.profiles import Profile, all_profiles
from attachments.services.processing import REPROCESS_TRANSITIONS, attachments_reprocess

from .models import BackfillCheckpoint
from .rescans import rescan_request

log = logging.getLogger("airlock.backfill")

ACTOR = "system:backfill"
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Selection:
    status: str = Status.READY
    profile: str | None = None
    since: datetime | None = None
    rescan: bool = False

    def params(self) -> dict[str, object]:
        return {
            "status": self.status,
            "profile": self.profile,
            "since": self.since.isoformat() if self.since else None,
            "rescan": self.rescan,
        }

    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(self.params(), sort_keys=True).encode()).hexdigest()[:64]


@dataclass
class BackfillReport:
    selection: dict[str, object]
    total: int = 0
    processed: int = 0
    skipped: int = 0
    resumed_after: str | None = None
    finished: bool = False
    dry_run: bool = False
    note: str = ""  # --rescan: what the background rescan will do with the flagged files

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def summary(self) -> str:
        if self.note:
            return self.note
        verb = "would re-process" if self.dry_run else "re-processed"
        resumed = f" (resumed after {self.resumed_after})" if self.resumed_after else ""
        state = "finished" if self.finished else "not finished: run again to resume"
        return f"backfill{resumed}: {verb} {self.processed} of {self.total}, skipped {self.skipped}; {state}"


def _missing_something() -> Q:
    has_thumbnail = Exists(Derivative.objects.filter(attachment=OuterRef("pk"), kind="thumbnail"))
    missing = Q(pk__in=[])
    for profile in all_profiles().values():
        if not profile.kinds:
            missing |= Q(profile=profile.name) & _needs(profile, has_thumbnail)
        for kind in profile.kinds:  # a kind's promise holds for the files of its types
            missing |= Q(profile=profile.name, content_type__in=kind.allowed_types) & _needs(kind, has_thumbnail)
    return missing


def _needs(profile: Profile, has_thumbnail: Exists) -> Q:
    needs = Q(pk__in=[])
    if profile.processor == "image" and "thumbnail" in profile.derivatives:
        needs |= ~Q(has_thumbnail)
    if "page_count" in profile.derivatives:
        needs |= ~Q(metadata__has_key="page_count")
    if "entries" in profile.derivatives:
        needs |= ~Q(metadata__has_key="entries")
    return needs


def backfill_queryset(selection: Selection, *, now: datetime) -> QuerySet[Attachment]:
    if selection.status not in REPROCESS_TRANSITIONS:
        raise ValueError(f"backfill handles statuses {sorted(REPROCESS_TRANSITIONS)}, not {selection.status!r}")
    qs = (
        Attachment.objects.filter(status=selection.status)
        .exclude(lifecycle__in=[Lifecycle.DISCARDED, Lifecycle.DELETED])
        .exclude(lifecycle=Lifecycle.STAGED, expires_at__lte=now)
    )
    if selection.profile:
        qs = qs.filter(profile=selection.profile)
    if selection.since:
        qs = qs.filter(created_at__gte=selection.since)
    if selection.status == Status.READY and not selection.rescan:
        qs = qs.filter(_missing_something())
    return qs


def _checkpoint(selection: Selection, *, restart: bool, now: datetime) -> BackfillCheckpoint:
    checkpoint, created = BackfillCheckpoint.objects.get_or_create(
        selection=selection.fingerprint(),
        defaults={"params": selection.params(), "started_at": now, "updated_at": now},
    )
    if not created and (restart or checkpoint.finished_at is not None):
        checkpoint.last_id, checkpoint.processed, checkpoint.finished_at = None, 0, None
        checkpoint.started_at = checkpoint.updated_at = now
        checkpoint.save()
    return checkpoint


def _process_batch(
    selection: Selection, checkpoint: BackfillCheckpoint, *, now: datetime, size: int
) -> tuple[int, int, uuid.UUID | None]:
    """Transition and enqueue one batch, and move the checkpoint, in one transaction."""
    with transaction.atomic():
        qs = backfill_queryset(selection, now=now).order_by("pk")
        if checkpoint.last_id is not None:
            qs = qs.filter(pk__gt=checkpoint.last_id)
        ids = list(qs.values_list("pk", flat=True)[:size])
        if not ids:
            return 0, 0, None
        # A row that changed since it was selected is skipped.
        done = attachments_reprocess(ids=ids, status=selection.status, actor=ACTOR, note="backfill")
        skipped = len(ids) - done
        BackfillCheckpoint.objects.filter(pk=checkpoint.pk).update(
            last_id=ids[-1], processed=checkpoint.processed + done, updated_at=timezone.now()
        )
        checkpoint.last_id, checkpoint.processed = ids[-1], checkpoint.processed + done
    return done, skipped, ids[-1]


def _flag_for_rescan(selection: Selection, report: BackfillReport, *, dry_run: bool, now: datetime) -> BackfillReport:
    """`--rescan`: the files stay ready; the background rescan scans them (no status change, no checkpoint here)."""
    if selection.status != Status.READY:
        raise ValueError("--rescan applies to ready files only (failed ones are retried without it)")
    flagged = rescan_request(profile=selection.profile, since=selection.since, dry_run=dry_run, now=now)
    report.total = flagged.selected
    report.processed = flagged.selected if dry_run else flagged.flagged
    report.finished = True
    report.note = flagged.summary()
    log.info("backfill run", extra=report.to_dict())
    return report


def backfill_run(
    selection: Selection,
    *,
    limit: int | None = None,
    batch_size: int = 100,
    dry_run: bool = False,
    restart: bool = False,
    progress: Progress | None = None,
    now: datetime | None = None,
) -> BackfillReport:
    """Re-run processing for the selection, resuming from its checkpoint unless told to restart."""
    now = now or timezone.now()
    report = BackfillReport(selection=selection.params(), dry_run=dry_run)
    if selection.rescan:
        return _flag_for_rescan(selection, report, dry_run=dry_run, now=now)
    if dry_run:
        report.total = report.processed = backfill_queryset(selection, now=now).count()
        report.finished = True
        return report
    checkpoint = _checkpoint(selection, restart=restart, now=now)
    report.resumed_after = str(checkpoint.last_id) if checkpoint.last_id else None
    remaining = backfill_queryset(selection, now=now)
    if checkpoint.last_id is not None:
        remaining = remaining.filter(pk__gt=checkpoint.last_id)
    report.total = remaining.count() if limit is None else min(limit, remaining.count())
    while limit is None or report.processed + report.skipped < limit:
        size = batch_size if limit is None else min(batch_size, limit - report.processed - report.skipped)
        done, skipped, last = _process_batch(selection, checkpoint, now=now, size=size)
        report.processed += done
        report.skipped += skipped
        if progress:
            progress(report.processed + report.skipped, report.total)
        if last is None:
            report.finished = True
            BackfillCheckpoint.objects.filter(pk=checkpoint.pk).update(finished_at=timezone.now())
            break
    log.info("backfill run", extra=report.to_dict())
    return report
