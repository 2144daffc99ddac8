"""Retention: the sweeper's purge phase removes rows past their windows, in batches, under the brakes.

Every table that grows with use has a window: the pipeline's bookkeeping, tombstones
(which carry a hard-deleted file's audit timeline; a live file's stays, tested by
tests/sweeper/test_history_kept.py), sweep runs, dead letters, backfill checkpoints, the admin's
log, django-axes' attempts and logs, expired browser sessions and client tokens, webhook history.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.contrib.admin.models import ADDITION, LogEntry
from django.contrib.sessions.models import Session

from attachments.models import (
    ClientToken,
    DeadLetter,
    OutboxMessage,
    StorageEvent,
    Tenant,
    Tombstone,
    TransitionLog,
)
from sweeper import retention
from sweeper.control import sweeper_control_set
from sweeper.models import BackfillCheckpoint, ReconcileRun, SweepRun
from sweeper.sweep import sweep_expired
from tests.sweeper.support import DAY, T0, make_attachment
from webhooks.models import WebhookEndpoint, WebhookEvent

pytestmark = pytest.mark.django_db

NOW = T0 + 400 * DAY
TABLES = {
    "outbox_sent": OutboxMessage,
    "storage_events": StorageEvent,
    "tombstones": Tombstone,
    "sweep_runs": SweepRun,
    "reconcile_runs": ReconcileRun,
    "dead_letters": DeadLetter,
    "backfill_checkpoints": BackfillCheckpoint,
    "admin_log_entries": LogEntry,
    "login_attempts": AccessAttempt,
    "login_logs": AccessLog,
    "login_failure_logs": AccessFailureLog,
    "sessions": Session,
    "webhook_events": WebhookEvent,
    "client_tokens": ClientToken,
}


def _stamp(model, pk, **when) -> None:
    model.objects.filter(pk=pk).update(**when)


def _rows(alice, age: timedelta, n: int) -> None:
    """n rows of every purged kind, `age` old at NOW."""
    when = NOW - age
    attachment = make_attachment(alice, lifecycle="committed", files=False)
    tenant = Tenant.objects.get(slug="acme")
    for i in range(n):
        sent = OutboxMessage.objects.create(actor_name="intake", queue_name="intake", args=[str(i)])
        _stamp(OutboxMessage, sent.pk, created_at=when, sent_at=when)
        event = StorageEvent.objects.create(
            dedupe_key=f"{age}:{i}", source="local", event_name="x", key=f"k{i}", outcome="started"
        )
        _stamp(StorageEvent, event.pk, received_at=when)
        log = TransitionLog.objects.create(
            attachment=attachment, transition="start", from_status="pending", to_status="processing", actor="system"
        )
        _stamp(TransitionLog, log.pk, created_at=when)
        Tombstone.objects.create(
            attachment_id=uuid.uuid4(),
            tenant_id=tenant.pk,
            tenant_slug="acme",
            profile="image",
            storage_key=f"t{age}:{i}",
            status="ready",
            lifecycle="deleted",
            created_at=when,
            purged_at=when,
            purged_by="system:purge",
        )
        SweepRun.objects.create(started_at=when, mode="normal")
        ReconcileRun.objects.create(started_at=when, mode="normal")
        letter = DeadLetter.objects.create(kind="processing", resolved_at=when, resolved_by="staff:mod")
        _stamp(DeadLetter, letter.pk, created_at=when)
        BackfillCheckpoint.objects.create(selection=f"{age}:{i}", started_at=when, updated_at=when, finished_at=when)
        entry = LogEntry.objects.create(user=alice, action_flag=ADDITION, object_repr="x", change_message="")
        _stamp(LogEntry, entry.pk, action_time=when)
        for model in (AccessAttempt, AccessLog, AccessFailureLog):
            extra = {"get_data": "", "post_data": "", "failures_since_start": 1} if model is AccessAttempt else {}
            made = model.objects.create(
                user_agent="ua",
                ip_address="10.0.0.1",
                username=f"u{age}:{i}",
                http_accept="*/*",
                path_info="/admin/login/",
                **extra,
            )
            _stamp(model, made.pk, attempt_time=when)
        WebhookEvent.objects.create(
            type="attachment.ready", tenant=tenant, attachment_id=attachment.pk, body="{}", created_at=when
        )
        # A two-day session opened `age` ago: long expired for the old rows, still live for the young.
        Session.objects.create(session_key=f"s{age.days}x{i}", session_data="", expire_date=when + 2 * DAY)
        # A guest page's client token, minted `age` ago for half a day: expired past its window for the old rows.
        ClientToken.objects.create(
            digest=f"{age.days:04d}{i:060d}",
            prefix="alc_",
            tenant=tenant,
            user=alice,
            subject=f"guest:{age.days}:{i}",
            created_at=when,
            expires_at=when + DAY / 2,
        )


def _counts() -> dict[str, int]:
    return {name: model.objects.count() for name, model in TABLES.items()}


@pytest.fixture
def aged(alice):
    _rows(alice, timedelta(days=800), 5)  # past every window
    _rows(alice, timedelta(days=1), 2)  # inside every window
    unsent = OutboxMessage.objects.create(actor_name="intake", queue_name="intake", args=["stuck"])
    OutboxMessage.objects.filter(pk=unsent.pk).update(created_at=NOW - 800 * DAY)
    # Kept whatever their age: what a human or a process still needs.
    open_letter = DeadLetter.objects.create(kind="processing")
    _stamp(DeadLetter, open_letter.pk, created_at=NOW - 800 * DAY)
    BackfillCheckpoint.objects.create(selection="unfinished", started_at=NOW - 800 * DAY, updated_at=NOW)
    owed = WebhookEvent.objects.create(
        type="attachment.ready",
        tenant=Tenant.objects.get(slug="acme"),
        attachment_id=uuid.uuid4(),
        body="{}",
        created_at=NOW - 800 * DAY,
    )
    endpoint = WebhookEndpoint.objects.create(tenant=owed.tenant, url="https://example.com/hook")
    owed.deliveries.create(
        endpoint=endpoint,
        created_at=owed.created_at,
        window_started_at=owed.created_at,
        next_attempt_at=NOW,
        enqueued_at=NOW,
    )
    return unsent


def test_rows_past_their_windows_are_purged_in_batches_and_the_run_says_how_many(aged):
    report = sweep_expired(now=NOW, batch_size=2)

    assert report.purged == {name: 5 for name in TABLES}
    # what is left: the young rows, what is still needed (an unsent message, an open dead letter,
    # an unfinished backfill, an event still owed), and this run's own record
    assert _counts() == {
        **{name: 2 for name in TABLES},
        "outbox_sent": 3,
        "sweep_runs": 3,
        "dead_letters": 3,
        "backfill_checkpoints": 3,
        "webhook_events": 3,
    }
    assert OutboxMessage.objects.filter(pk=aged.pk).exists()
    assert SweepRun.objects.get(pk=report.run_id).purged == report.purged
    assert TransitionLog.objects.count() == 7  # a live file's history, 800 days old or not, stays


def test_a_brake_pulled_mid_purge_stops_the_next_batch(aged, monkeypatch):
    from sweeper import retention

    calls = []

    def pulled() -> str:
        calls.append(1)
        return "killswitch"

    monkeypatch.setattr(retention, "delete_brake", pulled)
    purged = retention.purge_retention(now=NOW, batch_size=2)
    # each table's first read (one row), then the brake: no further batch
    assert set(purged.values()) == {1} and len(calls) == len(TABLES)
    monkeypatch.setattr(retention, "delete_brake", lambda: "")
    assert set(retention.purge_retention(now=NOW, batch_size=2).values()) == {4}  # the rest of the five


def test_each_window_is_a_setting(aged, settings):
    settings.AIRLOCK_RETENTION_DAYS = settings.AIRLOCK_RETENTION_DAYS.replace(outbox=1000, tombstones=1000)
    report = sweep_expired(now=NOW)
    assert report.purged["outbox_sent"] == 0 and report.purged["tombstones"] == 0
    assert report.purged["storage_events"] == 5


def test_a_run_purges_at_most_its_share_and_the_next_one_goes_on(aged, monkeypatch):
    monkeypatch.setattr(retention, "ROWS_PER_RUN", 3)
    assert sweep_expired(now=NOW, batch_size=2).purged["storage_events"] == 3
    assert sweep_expired(now=NOW, batch_size=2).purged["storage_events"] == 2


def test_the_latest_run_stays_whatever_its_age(alice):
    SweepRun.objects.create(started_at=NOW - 400 * DAY, mode="normal")
    latest = SweepRun.objects.create(started_at=NOW - 300 * DAY, mode="normal")
    ReconcileRun.objects.create(started_at=NOW - 300 * DAY, mode="normal")
    from sweeper.retention import purge_retention

    assert purge_retention(now=NOW, batch_size=10) == {**{name: 0 for name in TABLES}, "sweep_runs": 1}
    assert list(SweepRun.objects.values_list("pk", flat=True)) == [latest.pk]


def test_killswitch_purges_nothing_and_dry_run_only_counts(aged):
    before = _counts()
    sweeper_control_set(killswitch=True, actor="test")
    assert sweep_expired(now=NOW).purged == {}
    sweeper_control_set(killswitch=False, dry_run=True, actor="test")
    report = sweep_expired(now=NOW)
    assert report.purged["storage_events"] == 5 and "past retention would be purged" in report.summary()
    assert {k: v for k, v in _counts().items() if k != "sweep_runs"} == {
        k: v for k, v in before.items() if k != "sweep_runs"
    }
