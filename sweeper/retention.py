"""Retention: bookkeeping rows that would otherwise only grow leave the database after their window.

Run by the sweeper's purge phase (so the killswitch stops it, and a dry run
only counts), in batches of primary keys: old rows have the lowest ids, so
each batch is an index range scan and a short DELETE. A run purges at most
AIRLOCK_RETENTION_ROWS_PER_RUN rows per table; a backlog drains over ticks.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet

from attachments.models import OutboxMessage, StorageEvent, TransitionLog

from .models import ReconcileRun, SweepRun


def _older(days_setting: str, now: datetime) -> datetime:
    return now - timedelta(days=getattr(settings, days_setting))


def _runs(model: type[SweepRun] | type[ReconcileRun], now: datetime) -> QuerySet:
    # The latest run always stays: "is a sweep due" is read from it.
    latest = model.objects.order_by("-started_at", "-id").values_list("pk", flat=True)[:1]
    return model.objects.filter(started_at__lt=_older("AIRLOCK_RUN_RETENTION_DAYS", now)).exclude(pk__in=latest)


# table → rows past their window (evaluated lazily, with the run's clock).
RULES: dict[str, Callable[[datetime], QuerySet]] = {
    "outbox_sent": lambda now: OutboxMessage.objects.filter(
        sent_at__isnull=False, sent_at__lt=_older("AIRLOCK_OUTBOX_RETENTION_DAYS", now)),
    "storage_events": lambda now: StorageEvent.objects.filter(
        received_at__lt=_older("AIRLOCK_STORAGE_EVENT_RETENTION_DAYS", now)),
    "transition_logs": lambda now: TransitionLog.objects.filter(
        created_at__lt=_older("AIRLOCK_TRANSITION_LOG_RETENTION_DAYS", now)),
    "sweep_runs": lambda now: _runs(SweepRun, now),
    "reconcile_runs": lambda now: _runs(ReconcileRun, now),
}


def _purge(rows: Callable[[], QuerySet], *, batch_size: int, cap: int) -> int:
    total = 0
    while total < cap:
        size = min(batch_size, cap - total)
        ids = list(rows().order_by("pk").values_list("pk", flat=True)[:size])
        if not ids:
            break
        with transaction.atomic():
            deleted, _ = rows().model.objects.filter(pk__in=ids).delete()
        total += deleted
        if len(ids) < size:
            break
    return total


def purge_retention(*, now: datetime, batch_size: int, dry_run: bool = False) -> dict[str, int]:
    """Delete (or, in a dry run, count) the rows past each table's window; rows purged per table."""
    cap = settings.AIRLOCK_RETENTION_ROWS_PER_RUN
    if dry_run:
        return {table: min(rule(now).count(), cap) for table, rule in RULES.items()}
    return {table: _purge(lambda rule=rule: rule(now), batch_size=batch_size, cap=cap)
            for table, rule in RULES.items()}
