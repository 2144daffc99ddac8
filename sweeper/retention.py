"""Retention: rows that would otherwise only grow leave the database after their window.

Run by the sweeper's purge phase (so the killswitch stops it, and a dry run
only counts), in batches from the head of each table: old rows have the
lowest ids, so each batch is a short index range scan and a short DELETE,
however large the table. A run purges at most ROWS_PER_RUN rows per
table; a backlog drains over ticks, and a brake pulled mid-run stops
the next batch. Every table that grows with use has a rule here (bench/sweeper_sim.py
reports each one's rows per live attachment); rows a human or a process still
needs (an unsent job, an open dead letter, an unfinished backfill, a webhook
still owed) are never selected. A file's audit timeline has no window of its own:
it is kept as long as the file (live, deleted within its audit window, or held),
then as long as its tombstone (attachments/services/hard_delete.py).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.conf import settings
from django.contrib.admin.models import LogEntry
from django.contrib.sessions.models import Session
from django.db import transaction
from django.db.models import Q, QuerySet

from attachments.models import ClientToken, DeadLetter, OutboxMessage, StorageEvent, Tombstone
from attachments.retention.services import retention as attachments_retention
from webhooks.models import DeliveryStatus, WebhookEvent
from webhooks.services.retention import webhook_events_purge

from .control import delete_brake
from .models import BackfillCheckpoint, ReconcileRun, SweepRun


def _older(days: str, now: datetime) -> datetime:
    return now - timedelta(days=getattr(settings.AIRLOCK_RETENTION_DAYS, days))


def _runs(model: type[SweepRun] | type[ReconcileRun]) -> QuerySet:
    # The latest run always stays: "is a sweep due" is read from it.
    latest = model.objects.order_by("-started_at", "-id").values_list("pk", flat=True)[:1]
    return model.objects.exclude(pk__in=latest)


@dataclass(frozen=True)
class Rule:
    rows: Callable[[datetime], QuerySet]  # the rows the window applies to, given its cutoff
    stamp: str  # when a row was written: grows with its id (auto_now_add, or the run's start)
    days: str  # the window: a key of AIRLOCK_RETENTION_DAYS
    # The walk's order: the primary key, or the stamp itself where ids do not grow (webhook
    # events' ids are random; their created_at is indexed).
    by_stamp: bool = False
    # Deletes the picked rows: the attachments and webhooks apps' rows through their services;
    # other tables' (the sweeper's runs, Django's sessions and admin log, axes) by pk here.
    purge: Callable[[Collection[Any]], object] | None = None


# Bounds one sweep's work per table (a few seconds of deletes); a backlog drains over ticks.
ROWS_PER_RUN = 100_000

RULES: dict[str, Rule] = {
    # Unsent rows are never purged: the relay still owes them to the broker.
    "outbox_sent": Rule(
        lambda cutoff: OutboxMessage.objects.filter(sent_at__isnull=False),
        "created_at",
        "outbox",
        purge=attachments_retention.outbox_messages_purge,
    ),
    "storage_events": Rule(
        lambda cutoff: StorageEvent.objects.all(),
        "received_at",
        "storage_events",
        purge=attachments_retention.storage_events_purge,
    ),
    # No rule for the audit timeline (TransitionLog): a file's history lives as long as its row,
    # goes into its tombstone when the row is hard-deleted, and leaves with the tombstone.
    "tombstones": Rule(
        lambda cutoff: Tombstone.objects.all(),
        "purged_at",
        "tombstones",
        purge=attachments_retention.tombstones_purge,
    ),
    "sweep_runs": Rule(lambda cutoff: _runs(SweepRun), "started_at", "runs"),
    "reconcile_runs": Rule(lambda cutoff: _runs(ReconcileRun), "started_at", "runs"),
    # Open dead letters wait for a human, whatever their age; resolved ones go a window after resolution.
    "dead_letters": Rule(
        lambda cutoff: DeadLetter.objects.filter(resolved_at__lt=cutoff),
        "created_at",
        "dead_letters",
        purge=attachments_retention.dead_letters_purge,
    ),
    # An unfinished backfill resumes from its checkpoint; a finished one's is history.
    "backfill_checkpoints": Rule(
        lambda cutoff: BackfillCheckpoint.objects.filter(finished_at__lt=cutoff),
        "started_at",
        "backfill_checkpoints",
    ),
    "admin_log_entries": Rule(lambda cutoff: LogEntry.objects.all(), "action_time", "admin_log"),
    # django-axes: the lockout counters (an attempt older than the window no longer locks anyone
    # out, even with a permanent lockout) and its logs of logins and failures.
    "login_attempts": Rule(lambda cutoff: AccessAttempt.objects.all(), "attempt_time", "login_log"),
    "login_logs": Rule(lambda cutoff: AccessLog.objects.all(), "attempt_time", "login_log"),
    "login_failure_logs": Rule(lambda cutoff: AccessFailureLog.objects.all(), "attempt_time", "login_log"),
    # Signed-in browsers' sessions (admin, upload page): gone once expired plus the window;
    # Django leaves expired rows in place until someone runs clearsessions.
    "sessions": Rule(lambda cutoff: Session.objects.all(), "expire_date", "sessions", by_stamp=True),
    # Client tokens, a guest page's one per visit among them: gone a window after they expired
    # (revoked ones too: revoking does not move expires_at, and a revoked token is refused anyway).
    "client_tokens": Rule(
        lambda cutoff: ClientToken.objects.all(),
        "expires_at",
        "client_tokens",
        by_stamp=True,
        purge=attachments_retention.client_tokens_purge,
    ),
    # Webhook history: an event goes with its deliveries and their attempts, once nothing is owed.
    "webhook_events": Rule(
        lambda cutoff: WebhookEvent.objects.exclude(deliveries__status=DeliveryStatus.PENDING),
        "created_at",
        "webhooks",
        by_stamp=True,
        purge=webhook_events_purge,
    ),
}


def _purge(rule: Rule, *, now: datetime, batch_size: int, cap: int, dry_run: bool) -> int:
    """Walk the table from its oldest row, a batch at a time, until a row inside the window.

    Reading the head of the primary key (or of the stamp's index) costs a batch,
    whatever the table's size; filtering on the stamp instead would scan every row
    when nothing is due yet (not every stamp is indexed). A row a little out of
    order waits for the next run.
    """
    cutoff = _older(rule.days, now)
    order = (rule.stamp, "pk") if rule.by_stamp else ("pk",)
    total, after, size = 0, None, 1  # most runs find nothing due: the first read is one row
    while total < cap:
        head = rule.rows(cutoff).order_by(*order)
        if after is not None:
            pk, stamp = after
            head = head.filter(
                Q(**{f"{rule.stamp}__gt": stamp}) | Q(**{rule.stamp: stamp, "pk__gt": pk})
                if rule.by_stamp
                else Q(pk__gt=pk)
            )
        rows = list(head.values_list("pk", rule.stamp)[: min(size, cap - total)])
        size = batch_size
        due = [pk for pk, stamp in rows if stamp is not None and stamp < cutoff]
        if due and not dry_run:
            with transaction.atomic():
                if rule.purge is not None:
                    rule.purge(due)
                else:
                    rule.rows(cutoff).model.objects.filter(pk__in=due).delete()
        total += len(due)
        if not rows or len(due) < len(rows):
            break
        after = rows[-1]
        if total < cap and delete_brake() and not dry_run:
            break  # a brake pulled mid-run: no further batch
    return total


def purge_retention(*, now: datetime, batch_size: int, dry_run: bool = False) -> dict[str, int]:
    """Delete (or, in a dry run, count) the rows past each table's window; rows purged per table."""
    cap = ROWS_PER_RUN
    return {
        table: _purge(rule, now=now, batch_size=batch_size, cap=cap, dry_run=dry_run) for table, rule in RULES.items()
    }
