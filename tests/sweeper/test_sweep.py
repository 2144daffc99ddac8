"""The sweep: what it reaps, what it never touches, retries and dead letters, batches and limits."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings

from attachments.models import Attachment, DeadLetter, Derivative, Lifecycle, Status
from attachments.storage import get_gateway
from sweeper import reaping
from sweeper.locks import DatabaseLock, NoLock
from sweeper.models import SweepRun
from sweeper.schedule import sweep_due, sweep_if_due
from sweeper.sweep import sweep_expired
from tests.sweeper.support import (
    DAY,
    T0,
    CountingGateway,
    all_keys,
    files_of,
    make_attachment,
)

pytestmark = pytest.mark.django_db

LATER = T0 + 8 * DAY  # every default staged row made at T0 has expired by then


def test_reaps_expired_and_discarded_rows_by_their_stored_keys(alice):
    expired = make_attachment(alice, quarantined=True)
    discarded = make_attachment(alice, created_at=T0 + 5 * DAY, lifecycle=Lifecycle.DISCARDED, expires_at=T0 + 5 * DAY)
    fresh = make_attachment(alice, created_at=T0 + 4 * DAY)  # expires day 11
    committed = make_attachment(alice, lifecycle=Lifecycle.COMMITTED)
    keys = {a.pk: all_keys(a) for a in (expired, discarded)}
    gateway = CountingGateway()

    report = sweep_expired(now=LATER, gateway=gateway)

    assert (report.mode, report.selected, report.deleted, report.errors) == ("normal", 2, 2, 0)
    assert set(gateway.calls) == set(keys[expired.pk]) | set(keys[discarded.pk])
    assert all(n == 1 for n in gateway.calls.values())
    assert report.objects_deleted == len(gateway.removed) == len(gateway.calls) - 1  # original was moved
    for attachment in (expired, discarded):
        attachment.refresh_from_db()
        assert attachment.lifecycle == Lifecycle.DELETED
        assert attachment.deleted_at == LATER
        assert files_of(attachment) == set()
        assert Derivative.objects.filter(attachment=attachment).exists()  # rows stay for the audit window
    assert len(files_of(fresh)) == 3 and len(files_of(committed)) == 3
    assert Attachment.objects.get(pk=fresh.pk).lifecycle == Lifecycle.STAGED


def test_never_touches_a_committed_row_even_with_a_stale_expiry(alice):
    committed = make_attachment(alice, lifecycle=Lifecycle.COMMITTED, expires_at=T0)
    gateway = CountingGateway()
    report = sweep_expired(now=LATER, gateway=gateway)
    assert report.selected == 0 and not gateway.calls
    committed.refresh_from_db()
    assert committed.lifecycle == Lifecycle.COMMITTED and len(files_of(committed)) == 3


def test_deletes_only_stored_keys_never_neighbours(alice):
    attachment = make_attachment(alice)
    stray = attachment.storage_key + "-copy"
    get_gateway().write_chunks(stray, [b"not ours"])
    sweep_expired(now=LATER)
    assert get_gateway().head(stray) is not None


def test_object_already_gone_counts_as_success(alice):
    attachment = make_attachment(alice, files=False)
    report = sweep_expired(now=LATER)
    assert (report.deleted, report.errors, report.objects_deleted) == (1, 0, 0)
    attachment.refresh_from_db()
    assert attachment.lifecycle == Lifecycle.DELETED and attachment.delete_attempts == 0


def test_works_through_every_batch_and_honours_the_limit(alice):
    rows = [
        make_attachment(alice, created_at=T0 + timedelta(minutes=i), thumbnail=False, served=False) for i in range(11)
    ]

    limited = sweep_expired(now=LATER, limit=4, batch_size=3)
    assert (limited.selected, limited.deleted, limited.stopped) == (4, 4, "limit")
    # The oldest expiries go first.
    assert {a.pk for a in rows[:4]} == set(
        Attachment.objects.filter(lifecycle=Lifecycle.DELETED).values_list("pk", flat=True)
    )

    rest = sweep_expired(now=LATER, batch_size=3)
    assert (rest.selected, rest.deleted, rest.stopped) == (7, 7, "")
    assert not Attachment.objects.exclude(lifecycle=Lifecycle.DELETED).exists()


def test_a_failed_delete_is_retried_next_tick_then_dead_lettered_at_the_cap(alice, monkeypatch):
    monkeypatch.setattr(reaping, "DELETE_ATTEMPTS", 3)
    stuck = make_attachment(alice)
    fine = make_attachment(alice)
    failing_key = all_keys(stuck)[-1]  # the thumbnail
    gateway = CountingGateway(fail=[failing_key])

    first = sweep_expired(now=LATER, gateway=gateway)

    assert (first.deleted, first.errors, first.dead_lettered) == (1, 1, 0)
    stuck.refresh_from_db()
    assert stuck.lifecycle == Lifecycle.STAGED
    assert stuck.delete_attempts == 1 and failing_key in stuck.delete_error
    assert files_of(stuck) == {failing_key}  # the other keys went; they count as gone next time
    assert Attachment.objects.get(pk=fine.pk).lifecycle == Lifecycle.DELETED
    assert gateway.calls[failing_key] == 1  # not retried within the same run

    second = sweep_expired(now=LATER + timedelta(minutes=30), gateway=gateway)
    assert (second.selected, second.errors, second.dead_lettered) == (1, 1, 0)
    third = sweep_expired(now=LATER + timedelta(minutes=60), gateway=gateway)
    assert (third.errors, third.dead_lettered) == (1, 1)

    stuck.refresh_from_db()
    assert stuck.delete_attempts == 3 and stuck.lifecycle == Lifecycle.STAGED
    letter = DeadLetter.objects.get(kind=DeadLetter.Kind.SWEEP)
    assert letter.attachment_id == stuck.pk and failing_key in letter.last_error
    assert failing_key in letter.payload["failed_keys"]

    # At the cap it is a human's problem: no more automatic attempts.
    fourth = sweep_expired(now=LATER + timedelta(minutes=90), gateway=gateway)
    assert fourth.selected == 0 and gateway.calls[failing_key] == 3
    assert DeadLetter.objects.count() == 1


def test_a_retry_that_succeeds_marks_the_row_deleted_and_clears_the_error(alice):
    attachment = make_attachment(alice)
    gateway = CountingGateway(fail=[attachment.storage_key])
    sweep_expired(now=LATER, gateway=gateway)
    gateway.fail.clear()
    report = sweep_expired(now=LATER + timedelta(minutes=30), gateway=gateway)
    assert (report.deleted, report.errors) == (1, 0)
    attachment.refresh_from_db()
    assert attachment.lifecycle == Lifecycle.DELETED and attachment.delete_error == ""
    assert files_of(attachment) == set()


def test_hard_deletes_rows_after_the_audit_window(alice, settings):
    attachment = make_attachment(alice)
    sweep_expired(now=LATER)
    window = timedelta(days=settings.AIRLOCK_RETENTION_DAYS.audit_window)

    assert sweep_expired(now=LATER + window - timedelta(seconds=1)).hard_deleted == 0
    assert Attachment.objects.filter(pk=attachment.pk).exists()
    dry = sweep_expired(now=LATER + window, dry_run=True)
    assert dry.hard_deleted == 1 and Attachment.objects.filter(pk=attachment.pk).exists()

    report = sweep_expired(now=LATER + window)

    assert report.hard_deleted == 1
    assert not Attachment.objects.filter(pk=attachment.pk).exists()
    assert not Derivative.objects.filter(attachment_id=attachment.pk).exists()


def test_every_run_is_recorded(alice):
    make_attachment(alice)
    sweep_expired(now=LATER, trigger="tick")
    run = SweepRun.objects.get()
    assert (run.mode, run.trigger, run.selected, run.deleted, run.errors, run.dead_lettered) == (
        "normal",
        "tick",
        1,
        1,
        0,
        0,
    )
    assert run.started_at == LATER and run.finished_at >= run.started_at
    assert run.objects_deleted == 3 and run.would_delete == []


def test_lock_busy_records_a_run_and_deletes_nothing(alice):
    attachment = make_attachment(alice)
    holder = DatabaseLock("sweep")
    assert holder.acquire()
    gateway = CountingGateway()

    report = sweep_expired(now=LATER, gateway=gateway, lock=DatabaseLock("sweep"))

    assert report.mode == "lock_busy" and report.selected == 0 and not gateway.calls
    assert SweepRun.objects.get().mode == "lock_busy"
    assert len(files_of(attachment)) == 3
    holder.release()
    assert sweep_expired(now=LATER, gateway=gateway, lock=DatabaseLock("sweep")).deleted == 1


def test_sweep_if_due_runs_once_per_interval(alice):
    interval = timedelta(seconds=settings.AIRLOCK_SWEEP.interval_seconds)
    make_attachment(alice)
    assert sweep_due(LATER)
    assert sweep_if_due(now=LATER).deleted == 1
    assert sweep_if_due(now=LATER + interval - timedelta(seconds=1)) is None
    assert sweep_if_due(now=LATER + interval) is not None
    assert SweepRun.objects.filter(trigger="tick").count() == 2


def test_a_clock_that_went_backwards_does_not_stop_sweeping(alice):
    sweep_if_due(now=LATER + 10 * DAY)
    assert sweep_if_due(now=LATER) is not None


def test_concurrency_setting_bounds_the_delete_pool(alice, settings):
    import contextlib
    import threading

    settings.AIRLOCK_SWEEP = settings.AIRLOCK_SWEEP.replace(concurrency=2)
    for _ in range(6):
        make_attachment(alice)
    active, peak, guard = [0], [0], threading.Lock()
    entered = threading.Barrier(2, timeout=5)

    def on_delete(key: str) -> None:
        with guard:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        with contextlib.suppress(threading.BrokenBarrierError):
            entered.wait()  # both workers in flight at once: proves there are two, never more
        with guard:
            active[0] -= 1

    report = sweep_expired(now=LATER, gateway=CountingGateway(on_delete=on_delete), lock=NoLock())
    assert report.deleted == 6 and peak[0] == 2


def test_pending_and_processing_rows_are_reaped_too(alice):
    """Uncommitted is uncommitted, whatever processing is doing: the lease holder loses the row."""
    pending = make_attachment(alice, status=Status.PENDING)
    processing = make_attachment(alice, status=Status.PROCESSING)
    assert sweep_expired(now=LATER).deleted == 2
    for attachment in (pending, processing):
        assert files_of(attachment) == set()


@pytest.mark.django_db(transaction=True)
def test_the_scheduler_tick_sweeps_when_due(alice):
    from django.utils import timezone

    from ops.runtime import run_ticks_once

    attachment = make_attachment(alice, created_at=timezone.now() - 8 * DAY)
    run_ticks_once()
    attachment.refresh_from_db()
    assert attachment.lifecycle == Lifecycle.DELETED and files_of(attachment) == set()
    assert SweepRun.objects.get().trigger == "tick"
    run_ticks_once()  # not due again within the interval
    assert SweepRun.objects.count() == 1


def test_a_run_that_crashes_is_recorded_with_its_error_and_keeps_finished_batches(alice, monkeypatch):
    from sweeper import sweep as sweep_module

    for _ in range(4):
        make_attachment(alice, thumbnail=False, served=False)
    real = sweep_module.reap_batch
    calls = []

    def crash_on_second(**kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("database went away")
        return real(**kwargs)

    monkeypatch.setattr(sweep_module, "reap_batch", crash_on_second)
    with pytest.raises(RuntimeError):
        sweep_expired(now=LATER, batch_size=2)

    run = SweepRun.objects.get()
    assert run.deleted == 2 and "database went away" in run.errors_text and run.finished_at is not None
    assert Attachment.objects.filter(lifecycle=Lifecycle.DELETED).count() == 2
    from sweeper.locks import make_lock

    lock = make_lock("sweep")
    assert lock.acquire()  # the crashed run released its lock
    lock.release()
