"""Retention: the sweeper's purge phase removes bookkeeping rows past their windows, in batches, under the brakes."""

from __future__ import annotations

from datetime import timedelta

import pytest

from attachments.models import OutboxMessage, StorageEvent, TransitionLog
from sweeper.control import sweeper_control_set
from sweeper.models import ReconcileRun, SweepRun
from sweeper.sweep import sweep_expired
from tests.sweeper.support import DAY, T0, make_attachment

pytestmark = pytest.mark.django_db

NOW = T0 + 200 * DAY


def _rows(alice, age: timedelta, n: int) -> None:
    """n rows of every purged kind, `age` old at NOW."""
    when = NOW - age
    attachment = make_attachment(alice, lifecycle="committed", files=False)
    for i in range(n):
        sent = OutboxMessage.objects.create(actor_name="intake", queue_name="intake", args=[str(i)])
        OutboxMessage.objects.filter(pk=sent.pk).update(created_at=when, sent_at=when)
        event = StorageEvent.objects.create(dedupe_key=f"{age}:{i}", source="local", event_name="x",
                                            key=f"k{i}", outcome="started")
        StorageEvent.objects.filter(pk=event.pk).update(received_at=when)
        log = TransitionLog.objects.create(attachment=attachment, transition="start", from_status="pending",
                                           to_status="processing", actor="system")
        TransitionLog.objects.filter(pk=log.pk).update(created_at=when)
        SweepRun.objects.create(started_at=when, mode="normal")
        ReconcileRun.objects.create(started_at=when, mode="normal")


def _counts() -> dict[str, int]:
    return {"outbox_sent": OutboxMessage.objects.count(), "storage_events": StorageEvent.objects.count(),
            "transition_logs": TransitionLog.objects.count(), "sweep_runs": SweepRun.objects.count(),
            "reconcile_runs": ReconcileRun.objects.count()}


@pytest.fixture
def aged(alice):
    _rows(alice, timedelta(days=365), 5)  # past every window
    _rows(alice, timedelta(days=1), 2)  # inside every window
    unsent = OutboxMessage.objects.create(actor_name="intake", queue_name="intake", args=["stuck"])
    OutboxMessage.objects.filter(pk=unsent.pk).update(created_at=NOW - 365 * DAY)
    return unsent


def test_rows_past_their_windows_are_purged_in_batches_and_the_run_says_how_many(aged):
    report = sweep_expired(now=NOW, batch_size=2)

    assert report.purged == {"outbox_sent": 5, "storage_events": 5, "transition_logs": 5, "sweep_runs": 5,
                             "reconcile_runs": 5}
    # what is left: the young rows, the unsent message (never purged), and this run's own record
    assert _counts() == {"outbox_sent": 3, "storage_events": 2, "transition_logs": 2, "sweep_runs": 3,
                         "reconcile_runs": 2}
    assert OutboxMessage.objects.filter(pk=aged.pk).exists()
    assert SweepRun.objects.get(pk=report.run_id).purged == report.purged


def test_each_window_is_a_setting(aged, settings):
    settings.AIRLOCK_OUTBOX_RETENTION_DAYS = 1000
    settings.AIRLOCK_TRANSITION_LOG_RETENTION_DAYS = 1000
    report = sweep_expired(now=NOW)
    assert report.purged["outbox_sent"] == 0 and report.purged["transition_logs"] == 0
    assert report.purged["storage_events"] == 5


def test_a_run_purges_at_most_its_share_and_the_next_one_goes_on(aged, settings):
    settings.AIRLOCK_RETENTION_ROWS_PER_RUN = 3
    assert sweep_expired(now=NOW, batch_size=2).purged["storage_events"] == 3
    assert sweep_expired(now=NOW, batch_size=2).purged["storage_events"] == 2


def test_the_latest_run_stays_whatever_its_age(alice):
    SweepRun.objects.create(started_at=NOW - 400 * DAY, mode="normal")
    latest = SweepRun.objects.create(started_at=NOW - 300 * DAY, mode="normal")
    ReconcileRun.objects.create(started_at=NOW - 300 * DAY, mode="normal")
    from sweeper.retention import purge_retention

    assert purge_retention(now=NOW, batch_size=10) == {"outbox_sent": 0, "storage_events": 0, "transition_logs": 0,
                                                       "sweep_runs": 1, "reconcile_runs": 0}
    assert list(SweepRun.objects.values_list("pk", flat=True)) == [latest.pk]


def test_killswitch_purges_nothing_and_dry_run_only_counts(aged):
    before = _counts()
    sweeper_control_set(killswitch=True, actor="test")
    assert sweep_expired(now=NOW).purged == {}
    sweeper_control_set(killswitch=False, dry_run=True, actor="test")
    report = sweep_expired(now=NOW)
    assert report.purged["storage_events"] == 5 and "past retention would be purged" in report.summary()
    assert {k: v for k, v in _counts().items() if k != "sweep_runs"} == \
        {k: v for k, v in before.items() if k != "sweep_runs"}
