"""Retention: bookkeeping rows that would otherwise only grow leave the database after their window.

Run by the sweeper's purge phase (so the killswitch stops it, and a dry run
only counts), in batches from the head of each table's primary key: old
rows have the lowest ids, so each batch is a short index range scan and a
short DELETE, however large the table. A run purges at most
AIRLOCK_RETENTION_ROWS_PER_RUN rows per table; a backlog drains over ticks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet

from attachments.models import OutboxMessage, StorageEvent, TransitionLog

from .models import ReconcileRun, SweepRun


def _older(days_setting: str, now: datetime) -> datetime:
    return now - timedelta(days=getattr(settings, days_setting))


def _runs(model: type[SweepRun] | type[ReconcileRun]) -> QuerySet:
    # The latest run always stays: "is a sweep due" is read from it.
    latest = model.objects.order_by("-started_at", "-id").values_list("pk", flat=True)[:1]
    return model.objects.exclude(pk__in=latest)


@dataclass(frozen=True)
class Rule:
    rows: Callable[[], QuerySet]  # the rows the window applies to
    stamp: str  # when a row was written: grows with its id (auto_now_add, or the run's start)
    days: str  # the setting with the window


RULES: dict[str, Rule] = {
    # Unsent rows are never purged: the relay still owes them to the broker.
    "outbox_sent": Rule(lambda: OutboxMessage.objects.filter(sent_at__isnull=False), "created_at",
                        "AIRLOCK_OUTBOX_RETENTION_DAYS"),
    "storage_events": Rule(StorageEvent.objects.all, "received_at", "AIRLOCK_STORAGE_EVENT_RETENTION_DAYS"),
    "transition_logs": Rule(TransitionLog.objects.all, "created_at", "AIRLOCK_TRANSITION_LOG_RETENTION_DAYS"),
    "sweep_runs": Rule(lambda: _runs(SweepRun), "started_at", "AIRLOCK_RUN_RETENTION_DAYS"),
    "reconcile_runs": Rule(lambda: _runs(ReconcileRun), "started_at", "AIRLOCK_RUN_RETENTION_DAYS"),
}


def _purge(rule: Rule, *, now: datetime, batch_size: int, cap: int, dry_run: bool) -> int:
    """Walk the table from its oldest id, a batch at a time, until a row inside the window.

    Reading the head of the primary key costs a batch, whatever the table's
    size; filtering on the stamp instead would scan every row when nothing is
    due yet (the stamps are not all indexed). A row a little out of order
    waits for the next run.
    """
    cutoff = _older(rule.days, now)
    total, after, size = 0, None, 1  # most runs find nothing due: the first read is one row
    while total < cap:
        head = rule.rows().order_by("pk")
        if after is not None:
            head = head.filter(pk__gt=after)
        rows = list(head.values_list("pk", rule.stamp)[:min(size, cap - total)])
        size = batch_size
        due = [pk for pk, stamp in rows if stamp is not None and stamp < cutoff]
        if due and not dry_run:
            with transaction.atomic():
                rule.rows().model.objects.filter(pk__in=due).delete()
        total += len(due)
        if not rows or len(due) < len(rows):
            break
        after = rows[-1][0]
    return total


def purge_retention(*, now: datetime, batch_size: int, dry_run: bool = False) -> dict[str, int]:
    """Delete (or, in a dry run, count) the rows past each table's window; rows purged per table."""
    cap = settings.AIRLOCK_RETENTION_ROWS_PER_RUN
    return {table: _purge(rule, now=now, batch_size=batch_size, cap=cap, dry_run=dry_run)
            for table, rule in RULES.items()}
