"""A sweep run: brakes, the lock, batches until nothing is due, hard deletes, and the run record."""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import cast

from django.conf import settings
from django.utils import timezone

from attachments.storage import get_gateway
from attachments.storage.base import StorageGateway
from attachments.uploads.services.never_uploaded import intents_never_uploaded_reject
from attachments.uploads.services.tus import tus_uploads_expire

from . import metrics
from .control import sweeper_control_get
from .locks import SweepLock, holding, make_lock
from .models import SweepRun
from .purge import purge_deleted
from .reaping import BatchResult, Cursor, ObjectDeleter, preview_batch, reap_batch
from .retention import purge_retention

log = logging.getLogger("airlock.sweeper")

Mode = SweepRun.Mode
_MAX_ERROR_LINES = 200


@dataclass
class SweepReport:
    mode: str
    started_at: datetime
    finished_at: datetime | None = None
    run_id: int | None = None
    selected: int = 0
    deleted: int = 0
    objects_deleted: int = 0
    errors: int = 0
    dead_lettered: int = 0
    hard_deleted: int = 0
    purged: dict[str, int] = field(default_factory=dict)  # retention, per table (dry run: would purge)
    never_uploaded: int = 0  # committed intents whose upload can no longer come (dry run: would end)
    tus_expired: int = 0  # unfinished tus uploads whose staged bytes were removed (dry run: would be)
    stopped: str = ""  # "" (nothing left) | limit | killswitch | dry_run | lock_lost | error
    seconds: float = 0.0
    reap_seconds: float = 0.0  # time spent in batches (select, delete objects, update)
    purge_seconds: float = 0.0
    would_delete: list[str] = field(default_factory=list)
    error_messages: list[str] = field(default_factory=list)

    def add(self, batch: BatchResult) -> None:
        self.selected += batch.selected
        self.deleted += batch.deleted
        self.objects_deleted += batch.objects_deleted
        self.errors += batch.errors
        self.dead_lettered += batch.dead_lettered
        self.would_delete.extend(batch.would_delete)
        self.error_messages.extend(batch.error_messages)

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["started_at"] = self.started_at.isoformat()
        data["finished_at"] = self.finished_at.isoformat() if self.finished_at else None
        return data

    def summary(self) -> str:
        if self.mode in (Mode.KILLSWITCH, Mode.LOCK_BUSY):
            return f"sweep {self.mode}: nothing deleted" + (
                f" ({self.error_messages[0]})" if self.error_messages else ""
            )
        verb = "would delete" if self.mode == Mode.DRY_RUN else "deleted"
        count = len(self.would_delete) if self.mode == Mode.DRY_RUN else self.objects_deleted
        return (
            f"sweep {self.mode}: {self.selected} selected, {self.deleted} rows marked deleted, "
            f"{verb} {count} objects, {self.errors} errors, {self.dead_lettered} dead-lettered, "
            f"{self.hard_deleted} rows {'would be ' if self.mode == Mode.DRY_RUN else ''}hard-deleted, "
            f"{sum(self.purged.values())} past retention {'would be ' if self.mode == Mode.DRY_RUN else ''}"
            "purged, "
            f"{self.never_uploaded} committed intents {'would be ' if self.mode == Mode.DRY_RUN else ''}"
            "ended as never uploaded"
            + (f", stopped: {self.stopped}" if self.stopped else "")
            + f" in {self.seconds:.2f}s"
        )


def _record(report: SweepReport, trigger: str, run: SweepRun | None = None) -> SweepRun:
    run = run or SweepRun(started_at=report.started_at, trigger=trigger)
    run.mode = report.mode
    run.finished_at = report.finished_at
    for name in SweepRun.COUNTS:
        setattr(run, name, getattr(report, name))
    run.errors_text = "\n".join(report.error_messages[:_MAX_ERROR_LINES])
    run.would_delete = report.would_delete
    run.save()
    report.run_id = run.pk
    return run


def _finish(report: SweepReport, started: float) -> None:
    report.seconds = time.monotonic() - started
    report.finished_at = report.started_at + timedelta(seconds=report.seconds)
    metrics.SWEEP_RUNS.labels(mode=report.mode).inc()
    metrics.SWEEPER_DELETED.inc(report.deleted)
    metrics.SWEEPER_ERRORS.inc(report.errors)
    for outcome in ("dead_lettered", "hard_deleted"):
        metrics.SWEEP_ROWS.labels(outcome=outcome).inc(getattr(report, outcome))
    if report.mode != Mode.DRY_RUN:
        for table, count in report.purged.items():
            metrics.SWEEP_ROWS.labels(outcome=f"purged_{table}").inc(count)
    metrics.SWEEP_OBJECTS_DELETED.inc(report.objects_deleted)
    log.info("sweep finished", extra={k: v for k, v in report.to_dict().items() if k != "would_delete"})


def _brake_engaged(dry_run: bool) -> str:
    """Checked between batches: a brake pulled mid-run stops deletes at once."""
    control = sweeper_control_get()
    if control.killswitch:
        return "killswitch"
    if control.dry_run and not dry_run:
        return "dry_run"
    return ""


@dataclass(frozen=True)
class _Plan:
    """What sweep_expired was asked for (defaults filled in), handed to each phase."""

    now: datetime
    limit: int | None
    gateway: ObjectDeleter
    lock: SweepLock
    batch_size: int
    concurrency: int


def _reap(report: SweepReport, plan: _Plan) -> None:
    dry_run = report.mode == Mode.DRY_RUN
    cursor: Cursor | None = None
    with ThreadPoolExecutor(max_workers=plan.concurrency, thread_name_prefix="sweep-delete") as pool:
        while True:
            size = plan.batch_size if plan.limit is None else min(plan.batch_size, plan.limit - report.selected)
            if size <= 0:
                report.stopped = "limit"
                return
            if dry_run:
                batch = preview_batch(now=plan.now, after=cursor, size=size)
            else:
                batch = reap_batch(
                    now=plan.now, after=cursor, size=size, gateway=plan.gateway, pool=pool, workers=plan.concurrency
                )
            report.add(batch)
            # A brake pulled during the last batch holds what follows it too (the purges).
            report.stopped = _brake_engaged(dry_run)
            if report.stopped or batch.selected < size:
                return
            cursor = batch.cursor
            if not plan.lock.renew():
                report.stopped = "lock_lost"
                return


def sweep_expired(
    *,
    now: datetime | None = None,
    limit: int | None = None,
    dry_run: bool = False,
    trigger: str = "command",
    gateway: ObjectDeleter | None = None,
    lock: SweepLock | None = None,
    batch_size: int | None = None,
    concurrency: int | None = None,
) -> SweepReport:
    """Reap expired and discarded uploads, then hard-delete rows past the audit window."""
    now = now or timezone.now()
    started = time.monotonic()
    control = sweeper_control_get()
    if control.killswitch:
        mode = Mode.KILLSWITCH
    else:
        mode = Mode.DRY_RUN if dry_run or control.dry_run else Mode.NORMAL
    report = SweepReport(mode=mode, started_at=now)
    if mode == Mode.KILLSWITCH:
        _finish(report, started)
        _record(report, trigger)
        return report

    lock = lock or make_lock("sweep")
    with holding(lock, report.error_messages) as held:
        if not held:
            report.mode = Mode.LOCK_BUSY
            _finish(report, started)
            _record(report, trigger)
            return report
        run = _record(report, trigger)  # visible at once: the schedule sees a run has started
        try:
            _run_phases(
                report,
                _Plan(
                    now=now,
                    limit=limit,
                    gateway=gateway or get_gateway(),
                    lock=lock,
                    batch_size=batch_size or settings.AIRLOCK_SWEEP.batch,
                    concurrency=concurrency or settings.AIRLOCK_SWEEP.concurrency,
                ),
            )
        except Exception as exc:
            # What finished before stays finished (each batch is its own transaction); say why it stopped.
            report.stopped = "error"
            report.error_messages.append(f"sweep aborted: {type(exc).__name__}: {exc}")
            _finish(report, started)
            _record(report, trigger, run)
            raise
        _finish(report, started)
        _record(report, trigger, run)
    return report


def _run_phases(report: SweepReport, plan: _Plan) -> None:
    dry_run = report.mode == Mode.DRY_RUN
    # Not a delete, but it needs storage's word (HEAD): the sweep's gateway, once per interval.
    head = cast(StorageGateway, plan.gateway) if hasattr(plan.gateway, "head") else get_gateway()
    report.never_uploaded = len(
        intents_never_uploaded_reject(now=plan.now, actor="system:sweep", gateway=head, dry_run=dry_run)
    )
    report.tus_expired = len(tus_uploads_expire(now=plan.now, dry_run=dry_run))
    phase = time.monotonic()
    _reap(report, plan)
    report.reap_seconds = time.monotonic() - phase
    if report.stopped in ("", "limit"):
        phase = time.monotonic()
        report.hard_deleted = purge_deleted(now=plan.now, batch_size=plan.batch_size, limit=plan.limit, dry_run=dry_run)
        report.purged = purge_retention(now=plan.now, batch_size=plan.batch_size, dry_run=dry_run)
        report.purge_seconds = time.monotonic() - phase
