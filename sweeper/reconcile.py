"""Reconciliation: find where storage and the database drifted apart, and repair it.

Like Paperless's sanity checker it returns a report (one finding per object
it acted on); like Zulip's delete_old_unclaimed_attachments it leaves objects
younger than a grace window alone (their row may still be on its way) and
runs under a lock so two runs cannot overlap. Classes of drift:

- orphan: an object no row stores, older than the grace window → deleted
  (or moved to quarantine with ``quarantine_orphans``);
- deleted_leftover: an object of a row already marked deleted → deleted again;
- quarantine_expired: a quarantined object older than AIRLOCK_RETENTION_DAYS.quarantine → deleted;
- arrived: a pending row whose original is in storage but whose arrival was
  never recorded (a lost storage event) → recorded and enqueued;
- expired leases (processing past its lease → pending) and pending rows whose
  job went missing → re-driven, both by processing.recovery.

And the other way, rows → storage (sweeper/missing_objects.py, sweeper/multipart_orphans.py):

- missing_original: a ready row whose original is gone → failed/object_missing;
- missing_derivative: a ready row whose original is there but a derivative (or
  its served rendition) is gone → the derivatives are made again, the file stays ready;
- missing_variant: a named variant's row whose object is gone → the row is dropped
  (the next request for the variant makes it again);
- orphan_multipart: an unfinished multipart upload older than the upload URL
  lifetime that no live intent or tus upload owns → aborted.

Deletes (and orphan moves to quarantine, which delete the original), aborts,
failing rows and re-deriving obey the sweeper's brakes, read again between
chunks: under the killswitch they are held ("kept") and the run says so; under
dry run the keys are recorded on the run instead. The lock is renewed between
chunks; a run that lost it stops. Every run is recorded as a ReconcileRun.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from itertools import islice

from django.conf import settings
from django.utils import timezone

from attachments.models import Attachment, Derivative, Lifecycle, Status
from attachments.naming import QUARANTINE_PREFIX, TENANTS_PREFIX, parse_key, quarantine_key
from attachments.retention.services.holds import held_q_expression
from attachments.storage import get_gateway
from attachments.storage.base import ObjectInfo, StorageGateway, move
from attachments.uploads.services.uploads import object_arrived
from processing.recovery import (
    expire_leases,
    redrive_after_lost_workers,
    redrive_pending,
    wake_behind_expired_slots,
)

from . import metrics
from .control import delete_brake
from .locks import NoLock, SweepLock, holding, make_lock
from .missing_objects import ListedKeys, check_ready_files
from .models import ReconcileRun
from .multipart_orphans import abort_orphan_uploads

log = logging.getLogger("airlock.reconcile")

PREFIXES = (TENANTS_PREFIX, QUARANTINE_PREFIX)
_CHUNK = 1000
# An object no row stores is left alone this long: its row may still be on its way (an upload
# committing, a derivative being recorded), and an hour is far past any such window.
GRACE_SECONDS = 3600
KINDS = (
    "orphan",
    "deleted_leftover",
    "quarantine_expired",
    "arrived",
    "missing_original",
    "missing_derivative",
    "missing_variant",
    "orphan_multipart",
)
_ROW_KINDS = ("missing_original", "missing_derivative", "missing_variant", "orphan_multipart")  # errors reported


@dataclass(frozen=True)
class Finding:
    kind: str  # one of KINDS
    key: str
    # deleted | quarantined | enqueued | failed | regenerating | dropped | aborted | gone | skipped | would_* | kept
    # | error
    action: str
    attachment_id: str | None = None
    detail: str = ""


@dataclass
class ReconcileReport:
    dry_run: bool
    started_at: datetime
    finished_at: datetime | None = None
    lock_busy: bool = False
    mode: str = ReconcileRun.Mode.NORMAL
    brake: str = ""  # the brake that held deletes back, if any
    run_id: int | None = None
    scanned: int = 0
    expired_leases: int = 0
    redriven: int = 0
    rows_checked: int = 0  # ready rows whose objects were looked for
    findings: list[Finding] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    would_delete: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        counts = Counter(f.kind for f in self.findings)
        done = Counter(f.kind for f in self.findings if f.action in ("failed", "regenerating", "dropped", "aborted"))

        def rows(kind: str, *actions: str) -> int:  # a row with two derivatives gone is one row
            return len(
                {f.attachment_id for f in self.findings if f.kind == kind and (not actions or f.action in actions)}
            )

        return {
            **{kind: counts.get(kind, 0) for kind in ("orphan", "deleted_leftover", "quarantine_expired", "arrived")},
            "missing_originals": counts.get("missing_original", 0),
            "missing_originals_failed": done.get("missing_original", 0),
            "missing_derivatives": rows("missing_derivative"),
            "missing_derivatives_regenerated": rows("missing_derivative", "regenerating"),
            "missing_variants": counts.get("missing_variant", 0),
            "missing_variants_dropped": done.get("missing_variant", 0),
            "orphan_multipart_found": counts.get("orphan_multipart", 0),
            "orphan_multipart_aborted": done.get("orphan_multipart", 0),
        }

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["started_at"] = self.started_at.isoformat()
        data["finished_at"] = self.finished_at.isoformat() if self.finished_at else None
        data["counts"] = self.counts()
        return data

    def summary_lines(self) -> list[str]:
        if self.lock_busy:
            return ["reconcile: another run holds the lock; nothing done"]
        prefix = "reconcile (dry run)" if self.dry_run else "reconcile"
        if self.brake == "killswitch":
            prefix += " (killswitch on: nothing deleted)"
        elif self.brake == "dry_run":
            prefix += " (sweeper dry run on: nothing deleted, would-delete keys recorded)"
        counts = ", ".join(f"{kind} {n}" for kind, n in self.counts().items())
        lines = [
            (
                f"{prefix}: scanned {self.scanned} objects, {self.rows_checked} ready rows; {counts}; "
                f"expired leases {self.expired_leases}; re-driven pending {self.redriven}; "
                f"errors {len(self.errors)}"
            )
        ]
        lines += [f"  {f.kind}: {f.key} → {f.action}" + (f" ({f.detail})" if f.detail else "") for f in self.findings]
        lines += [f"  error: {e}" for e in self.errors]
        return lines


@dataclass(frozen=True)
class _Row:
    pk: uuid.UUID
    lifecycle: str
    status: str
    uploaded_at: datetime | None
    expires_at: datetime | None
    storage_key: str
    keys: frozenset[str]
    held: bool = False  # under a legal hold: none of its objects is deleted or moved


def attachment_id_of(key: str) -> uuid.UUID | None:
    """The attachment a key was minted for (None if it fits no layout of attachments.naming)."""
    parsed = parse_key(key)
    return parsed.attachment_id if parsed else None


def _rows_for(ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, _Row]:
    ids = list(set(ids))
    derived: dict[uuid.UUID, set[str]] = {}
    for attachment_id, key in Derivative.objects.filter(attachment_id__in=ids).values_list(
        "attachment_id", "storage_key"
    ):
        derived.setdefault(attachment_id, set()).add(key)
    rows = {}
    for pk, lifecycle, status, uploaded_at, expires_at, sk, ck, served, qk, held in (
        Attachment.objects.filter(pk__in=ids)
        .annotate(held=held_q_expression())
        .values_list(
            "pk",
            "lifecycle",
            "status",
            "uploaded_at",
            "expires_at",
            "storage_key",
            "content_key",
            "served_key",
            "quarantine_key",
            "held",
        )
    ):
        keys = frozenset(k for k in (sk, ck, served, qk, *derived.get(pk, ())) if k)
        rows[pk] = _Row(pk, lifecycle, status, uploaded_at, expires_at, sk, keys, bool(held))
    return rows


def _older_than(info: ObjectInfo, cutoff: datetime) -> bool:
    # Unknown age counts as young: never delete what we cannot date.
    return info.last_modified is not None and info.last_modified < cutoff


class _Reconciler:
    def __init__(
        self,
        *,
        now: datetime,
        dry_run: bool,
        quarantine_orphans: bool,
        gateway: StorageGateway,
        report: ReconcileReport,
        lock: SweepLock | None = None,
    ) -> None:
        self.now, self.dry_run, self.quarantine_orphans = now, dry_run, quarantine_orphans
        self.gateway, self.report = gateway, report
        self.lock: SweepLock = lock or NoLock()
        self.lock_lost = False
        self.listed = ListedKeys()  # what the storage walk saw, for the rows → storage direction
        self.grace_cutoff = now - timedelta(seconds=GRACE_SECONDS)
        self.quarantine_cutoff = now - timedelta(days=settings.AIRLOCK_RETENTION_DAYS.quarantine)

    @property
    def brake(self) -> str:
        """What holds deletes back: an explicit dry run, else the sweeper's brakes."""
        return "dry_run" if self.dry_run else self.report.brake

    def check_brakes(self) -> None:
        # Read before every chunk: a brake pulled mid-run holds the deletes after it.
        # A brake once seen stays for the run (killswitch wins over dry run).
        brake = delete_brake()
        if brake == "killswitch" or (brake and not self.report.brake):
            self.report.brake = brake

    def keep_going(self) -> bool:
        """Renew the lock between chunks; a run that lost it stops (another may hold it now)."""
        if not self.lock_lost and not self.lock.renew():
            self.lock_lost = True
            self.report.errors.append("lost the reconcile lock: stopped")
        return not self.lock_lost

    def run(self, objects: Iterator[ObjectInfo]) -> None:
        while chunk := list(islice(objects, _CHUNK)):
            if not self.keep_going():
                return
            self.check_brakes()
            self.report.scanned += len(chunk)
            for info in chunk:
                if info.key.startswith(TENANTS_PREFIX):
                    self.listed.add(info.key)
            rows = _rows_for(i for i in map(attachment_id_of, (o.key for o in chunk)) if i)
            for info in chunk:
                attachment_id = attachment_id_of(info.key)
                self.classify(info, rows.get(attachment_id) if attachment_id else None)

    def classify(self, info: ObjectInfo, row: _Row | None) -> None:
        key = info.key
        if row is not None and row.lifecycle == Lifecycle.DELETED:
            self.delete(info, "deleted_leftover", row)
        elif key.startswith(QUARANTINE_PREFIX):
            if _older_than(info, self.quarantine_cutoff):
                self.delete(info, "quarantine_expired", row)
        elif row is None or key not in row.keys:
            if _older_than(info, self.grace_cutoff):
                self.orphan(info, row)
        elif key == row.storage_key and self.lost_arrival(row) and _older_than(info, self.grace_cutoff):
            self.arrive(info, row)

    def lost_arrival(self, row: _Row) -> bool:
        if row.status != Status.PENDING or row.uploaded_at is not None:
            return False
        if row.lifecycle == Lifecycle.COMMITTED:
            return True
        return row.lifecycle == Lifecycle.STAGED and row.expires_at is not None and row.expires_at > self.now

    def note(self, kind: str, info: ObjectInfo, action: str, row: _Row | None, detail: str = "") -> None:
        self.record(kind, info.key, action, row.pk if row else None, detail)

    def record(self, kind: str, key: str, action: str, attachment_id: uuid.UUID | None, detail: str = "") -> None:
        self.report.findings.append(Finding(kind, key, action, str(attachment_id) if attachment_id else None, detail))
        if action == "error" and kind in _ROW_KINDS:
            self.report.errors.append(f"{kind} {key}: {detail}")
        metrics.RECONCILE_FINDINGS.labels(kind=kind).inc()
        log.info("reconcile finding", extra={"kind": kind, "key": key, "action": action})

    def held(self, kind: str, info: ObjectInfo, row: _Row | None, would: str) -> bool:
        """Under a brake: note what would have happened instead of doing it."""
        if self.brake == "killswitch":
            self.note(kind, info, "kept", row, "killswitch")
        elif self.brake == "dry_run":
            self.report.would_delete.append(info.key)
            self.note(kind, info, would, row)
        return bool(self.brake)

    def on_hold(self, kind: str, info: ObjectInfo, row: _Row | None) -> bool:
        """A held file's objects stay, whatever drift they look like (counted as kept: legal_hold)."""
        if row is None or not row.held:
            return False
        self.note(kind, info, "kept", row, "legal_hold")
        return True

    def delete(self, info: ObjectInfo, kind: str, row: _Row | None) -> None:
        if self.on_hold(kind, info, row) or self.held(kind, info, row, "would_delete"):
            return None
        try:
            self.gateway.delete(info.key)
        except Exception as exc:  # noqa: BLE001 - reported, the next run tries again
            self.report.errors.append(f"delete {info.key}: {exc}")
            return self.note(kind, info, "error", row, str(exc)[:200])
        self.note(kind, info, "deleted", row)

    def orphan(self, info: ObjectInfo, row: _Row | None) -> None:
        if not self.quarantine_orphans:
            return self.delete(info, "orphan", row)
        if self.on_hold("orphan", info, row) or self.held("orphan", info, row, "would_quarantine"):
            return None
        try:
            move(self.gateway, info.key, quarantine_key(info.key))
        except Exception as exc:  # noqa: BLE001 - reported, the next run tries again
            self.report.errors.append(f"quarantine {info.key}: {exc}")
            return self.note("orphan", info, "error", row, str(exc)[:200])
        self.note("orphan", info, "quarantined", row)

    def arrive(self, info: ObjectInfo, row: _Row) -> None:
        if self.dry_run:
            return self.note("arrived", info, "would_enqueue", row)
        arrival = object_arrived(
            key=info.key,
            size=info.size,
            source="reconcile",
            dedupe_key=f"reconcile:{info.key}:{info.etag or info.size}",
            event_name="ObjectCreated:Reconcile",
        )
        self.note("arrived", info, "enqueued" if arrival.outcome == "started" else arrival.outcome, row)


def _listing(gateway: StorageGateway) -> Iterator[ObjectInfo]:
    for prefix in PREFIXES:
        yield from gateway.list_prefix(prefix)


def _mode(report: ReconcileReport) -> str:
    if report.lock_busy:
        return ReconcileRun.Mode.LOCK_BUSY
    if report.brake == "killswitch":
        return ReconcileRun.Mode.KILLSWITCH
    return ReconcileRun.Mode.DRY_RUN if report.dry_run or report.brake else ReconcileRun.Mode.NORMAL


def _record(report: ReconcileReport, trigger: str, run: ReconcileRun | None = None) -> ReconcileRun:
    """Write the run's record (at the start, so it is visible, and again at the end)."""
    run = run or ReconcileRun(started_at=report.started_at, trigger=trigger)
    report.mode = run.mode = _mode(report)
    run.finished_at = report.finished_at
    run.scanned, run.counts = report.scanned, report.counts()
    run.expired_leases, run.redriven = report.expired_leases, report.redriven
    run.objects_deleted = sum(1 for f in report.findings if f.action in ("deleted", "quarantined"))
    run.kept = sum(1 for f in report.findings if f.action == "kept")
    run.errors, run.errors_text = len(report.errors), "\n".join(report.errors[:200])
    run.note = {
        "killswitch": "killswitch on: nothing deleted",
        "dry_run": "dry run: nothing deleted, would-delete keys recorded",
    }.get("dry_run" if report.dry_run else report.brake, "")
    run.would_delete = report.would_delete
    run.save()
    report.run_id = run.pk
    return run


def reconcile_storage(
    *,
    now: datetime | None = None,
    dry_run: bool = False,
    quarantine_orphans: bool = False,
    gateway: StorageGateway | None = None,
    lock: SweepLock | None = None,
    trigger: str = "command",
) -> ReconcileReport:
    """Compare storage with the rows and repair each class of drift; return what was found and done."""
    now = now or timezone.now()
    started = time.monotonic()
    report = ReconcileReport(dry_run=dry_run, started_at=now)
    lock = lock or make_lock("reconcile")
    with holding(lock, report.errors) as held:
        if not held:
            report.lock_busy = True
            _record(report, trigger)
            return report
        reconciler = _Reconciler(
            now=now,
            dry_run=dry_run,
            quarantine_orphans=quarantine_orphans,
            gateway=gateway or get_gateway(),
            report=report,
            lock=lock,
        )
        reconciler.check_brakes()
        run = _record(report, trigger)
        report.expired_leases = expire_leases(now=now, dry_run=dry_run)
        report.redriven = redrive_pending(now=now, dry_run=dry_run)
        if not dry_run:  # a deployment that runs ticks from cron gets the lost-worker re-drive too
            report.redriven += redrive_after_lost_workers(now=now)[1]
            wake_behind_expired_slots()  # jobs, not pending files: logged, not counted here
        try:
            reconciler.run(_listing(reconciler.gateway))
            if reconciler.keep_going():
                report.rows_checked = check_ready_files(reconciler, reconciler.listed, now=now)
            if reconciler.keep_going():
                abort_orphan_uploads(reconciler, now=now)
        finally:
            report.finished_at = now + timedelta(seconds=time.monotonic() - started)
            _record(report, trigger, run)
    log.info(
        "reconcile finished",
        extra={
            "counts": report.counts(),
            "dry_run": dry_run,
            "mode": report.mode,
            "scanned": report.scanned,
            "errors": len(report.errors),
        },
    )
    return report
