"""Erase a user, a tenant or a subject: let every file go now, revoke the tokens, and remove the objects at once.

The rows change in attachments.retention.services.erasure (tokens revoked, staged files
discarded and committed ones released, all due now, held files skipped);
then the objects are removed here by the sweeper's own batches
(reaping.reap_batch, narrowed to the scope's files), so each removal marks
its row deleted and sends `attachment.deleted`, as a sweep would. The
sweeper's brakes apply: under the killswitch or its dry run nothing is
removed now, the files stay due, and the first sweep after the brake is
lifted removes them. A key that fails to delete is retried by the sweeper
like any other (and dead-lettered after reaping.DELETE_ATTEMPTS).
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from attachments.models import Attachment, Lifecycle
from attachments.retention.services.erasure import (
    ErasurePlan,
    ErasureScope,
    erasure_plan,
    erasure_release,
    stored_footprint,
)
from attachments.storage import get_gateway

from .control import delete_brake
from .reaping import Cursor, ObjectDeleter, reap_batch

log = logging.getLogger("airlock.erasure")


@dataclass
class ErasureReport:
    subject: str
    dry_run: bool
    files: int  # files let go (would be, in a dry run)
    by_lifecycle: dict[str, int]
    objects: int  # stored objects of those files
    bytes: int
    held_skipped: list[str]  # ids of held files left as they are
    tokens_revoked: int
    files_removed: int = 0  # rows whose objects are gone (marked deleted) by this run
    objects_removed: int = 0
    bytes_removed: int = 0
    deferred: str = ""  # the brake that keeps the removal for a later sweep ("killswitch", "dry_run")
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def summary(self) -> list[str]:
        verb = "would let go" if self.dry_run else "let go"
        lines = [
            f"{self.subject}: {verb} {self.files} files "
            f"({', '.join(f'{n} {k}' for k, n in sorted(self.by_lifecycle.items())) or 'none'}), "
            f"{self.objects} objects, {self.bytes} bytes; "
            f"{'would revoke' if self.dry_run else 'revoked'} {self.tokens_revoked} API tokens"
        ]
        if self.held_skipped:
            lines.append(
                f"  skipped {len(self.held_skipped)} held files (legal hold): "
                + ", ".join(self.held_skipped[:20])
                + (" …" if len(self.held_skipped) > 20 else "")
            )
        if not self.dry_run:
            lines.append(
                f"  removed {self.objects_removed} objects ({self.bytes_removed} bytes) of {self.files_removed} files"
            )
        if self.deferred:
            lines.append(
                f"  sweeper {self.deferred} is on: the files are due and the first sweep after it is "
                "lifted removes them"
            )
        lines += [f"  error: {e}" for e in self.errors]
        return lines


def _report(plan: ErasurePlan, *, dry_run: bool) -> ErasureReport:
    return ErasureReport(
        subject=plan.subject,
        dry_run=dry_run,
        files=plan.files,
        by_lifecycle=plan.by_lifecycle,
        objects=plan.objects,
        bytes=plan.bytes,
        held_skipped=plan.held,
        tokens_revoked=plan.tokens,
    )


def erase(
    scope: ErasureScope,
    *,
    actor: str,
    dry_run: bool = False,
    now: datetime | None = None,
    gateway: ObjectDeleter | None = None,
) -> ErasureReport:
    """Erase `scope` (dry run: report only, change nothing)."""
    if not actor:
        raise ValueError("actor is required: an erasure says who ran it")
    if dry_run:
        return _report(erasure_plan(scope), dry_run=True)
    now = now or timezone.now()
    report = _report(erasure_release(scope, actor=actor, now=now), dry_run=False)
    report.deferred = delete_brake()
    if not report.deferred:
        _remove(report, scope, now=now, actor=actor, gateway=gateway or get_gateway())
    log.warning(
        "erasure",
        extra={k: v for k, v in report.to_dict().items() if k != "held_skipped"}
        | {"actor": actor, "held": len(report.held_skipped)},
    )
    return report


def _remove(report: ErasureReport, scope: ErasureScope, *, now: datetime, actor: str, gateway: ObjectDeleter) -> None:
    """Reap the scope's due files now, batch by batch (each its own transaction, like a sweep)."""
    size = settings.AIRLOCK_SWEEP.batch
    workers = settings.AIRLOCK_SWEEP.concurrency
    cursor: Cursor | None = None
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="erase-delete") as pool:
        while True:
            batch = reap_batch(
                now=now,
                after=cursor,
                size=size,
                gateway=gateway,
                pool=pool,
                workers=workers,
                only=scope.files,
                actor=actor,
            )
            report.objects_removed += batch.objects_deleted
            report.errors += batch.error_messages
            if batch.selected < size:
                break
            report.deferred = delete_brake()  # a brake pulled mid-run holds the next batch, as in a sweep
            if report.deferred:
                break
            cursor = batch.cursor
    removed = list(
        Attachment.objects.filter(scope.files, lifecycle=Lifecycle.DELETED, deleted_at=now).values_list("pk", flat=True)
    )
    report.files_removed = len(removed)
    _objects, report.bytes_removed = stored_footprint(removed)
