"""Races on real PostgreSQL: sweepers against each other, and commits against the sweep."""

from __future__ import annotations

import random
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, transaction

from attachments.errors import AttachmentInvalid
from attachments.models import Attachment, Lifecycle
from attachments.services.lifecycle import attachments_commit
from sweeper.locks import NoLock, make_lock
from sweeper.models import SweepRun
from sweeper.sweep import sweep_expired
from tests.sweeper.support import DAY, T0, CountingGateway, files_of, make_attachment

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

EXPIRY = T0 + 7 * DAY  # of every default staged row made at T0


def _run_threads(*targets, timeout: float = 60):
    barrier = threading.Barrier(len(targets))
    results: list = [None] * len(targets)

    def wrap(index: int, target) -> None:
        try:
            barrier.wait(timeout=10)
            results[index] = ("ok", target())
        except Exception as exc:  # noqa: BLE001
            results[index] = ("error", exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=wrap, args=(i, t)) for i, t in enumerate(targets)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    return results


def _wait_until_blocked_on_a_lock(timeout: float = 10) -> None:
    """Poll pg_stat_activity until another backend waits on a row lock (observing, not sleeping for time)."""
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
            )
            if cursor.fetchone()[0]:
                return
            time.sleep(0.01)
    raise AssertionError("nobody blocked on the row lock")


def test_two_sweepers_started_together_delete_each_object_once(alice):
    rows = [make_attachment(alice, created_at=T0 + timedelta(seconds=i)) for i in range(60)]
    gateway = CountingGateway()

    results = _run_threads(*(lambda: sweep_expired(now=EXPIRY + DAY, gateway=gateway, batch_size=7) for _ in range(2)))

    reports = [value for kind, value in results if kind == "ok"]
    assert len(reports) == 2, results
    assert sorted(r.mode for r in reports) in (["lock_busy", "normal"], ["normal", "normal"])
    assert SweepRun.objects.count() == 2
    # A run that lost its lock midway (a shared Redis flushed under it) stops early; the next
    # tick finishes. Either way no object is ever deleted twice.
    if sum(r.deleted for r in reports) < 60:
        assert any(r.stopped == "lock_lost" for r in reports), reports
        sweep_expired(now=EXPIRY + DAY, gateway=gateway)
    assert gateway.calls and max(gateway.calls.values()) == 1
    assert len(gateway.calls) == 180
    assert all(files_of(a) == set() for a in rows)
    assert Attachment.objects.filter(lifecycle=Lifecycle.DELETED).count() == 60


def test_row_locks_alone_keep_overlapping_sweeps_from_deleting_twice(alice):
    """Even if the global lock failed (expired mid-run, split brain), SKIP LOCKED keeps deletes single."""
    for i in range(80):
        make_attachment(alice, created_at=T0 + timedelta(seconds=i))
    gateway = CountingGateway()

    results = _run_threads(
        *(lambda: sweep_expired(now=EXPIRY + DAY, gateway=gateway, lock=NoLock(), batch_size=5) for _ in range(4))
    )

    assert all(kind == "ok" for kind, _ in results), results
    assert sum(value.deleted for _, value in results) == 80
    assert len(gateway.calls) == 240 and max(gateway.calls.values()) == 1


def test_many_sweepers_on_the_real_lock_sweep_once_each_tick(alice):
    for i in range(20):
        make_attachment(alice, created_at=T0 + timedelta(seconds=i))
    gateway = CountingGateway()
    results = _run_threads(
        *(lambda: sweep_expired(now=EXPIRY + DAY, gateway=gateway, lock=make_lock("sweep")) for _ in range(4))
    )
    assert all(kind == "ok" for kind, _ in results), results
    assert max(gateway.calls.values()) == 1 and len(gateway.calls) == 60


def _commit_open_while_a_sweep_runs(owner, attachment, gateway):
    """A commit (clock: just before expiry) holds its rows while a sweep (clock: after it) runs."""
    committed_but_open, sweep_done = threading.Event(), threading.Event()

    def commit() -> list[str]:
        with transaction.atomic():
            result = attachments_commit(
                owner=owner, ids=[attachment.pk], ref="post:1", now=EXPIRY - timedelta(seconds=1)
            )
            committed_but_open.set()
            assert sweep_done.wait(timeout=20)
        return result

    def sweep():
        assert committed_but_open.wait(timeout=20)
        try:
            return sweep_expired(now=EXPIRY + timedelta(seconds=1), gateway=gateway)
        finally:
            sweep_done.set()

    return _run_threads(commit, sweep)


def _commit_while_the_sweep_deletes(owner, attachment):
    """The sweep holds the row while it deletes its objects; a commit arrives and queues behind it."""
    deleting, release = threading.Event(), threading.Event()

    def hold_in_delete(key: str) -> None:
        deleting.set()
        assert release.wait(timeout=20)

    gateway = CountingGateway(on_delete=hold_in_delete)

    def sweep():
        return sweep_expired(now=EXPIRY, gateway=gateway, concurrency=1)

    def commit():
        assert deleting.wait(timeout=20)
        return attachments_commit(owner=owner, ids=[attachment.pk], ref="post:1", now=EXPIRY - timedelta(seconds=1))

    def referee():
        assert deleting.wait(timeout=20)
        _wait_until_blocked_on_a_lock()  # the commit is queued behind the sweep's row lock
        release.set()

    return _run_threads(sweep, commit, referee)


def test_a_commit_holding_the_row_wins_over_the_sweep(alice):
    """The commit locked the row (its clock said: not expired yet); the sweep's clock says expired."""
    attachment = make_attachment(alice)
    gateway = CountingGateway()
    (commit_kind, committed), (sweep_kind, report) = _commit_open_while_a_sweep_runs(alice, attachment, gateway)

    assert commit_kind == "ok" and committed == [str(attachment.pk)]
    assert sweep_kind == "ok" and report.deleted == 0 and not gateway.calls
    attachment.refresh_from_db()
    assert attachment.lifecycle == Lifecycle.COMMITTED
    assert len(files_of(attachment)) == 3
    # And the next sweep leaves it alone too.
    assert sweep_expired(now=EXPIRY + DAY, gateway=gateway).selected == 0
    assert len(files_of(attachment)) == 3


def test_a_commit_arriving_while_the_sweep_holds_the_row_waits_and_is_refused(alice):
    attachment = make_attachment(alice)
    (sweep_kind, report), (commit_kind, error), (referee_kind, _) = _commit_while_the_sweep_deletes(alice, attachment)

    assert sweep_kind == "ok" and report.deleted == 1
    assert referee_kind == "ok"
    assert commit_kind == "error" and isinstance(error, AttachmentInvalid)
    assert error.details == {str(attachment.pk): "expired"}
    attachment.refresh_from_db()
    assert attachment.lifecycle == Lifecycle.DELETED


def test_commits_racing_sweeps_never_lose_a_committed_file(alice):
    """Rows right at their expiry; clients commit with clocks just before it while sweepers run after it."""
    rng = random.Random(7)
    rows = [make_attachment(alice, created_at=T0 + timedelta(milliseconds=i), thumbnail=False) for i in range(120)]
    order = rows[:]
    rng.shuffle(order)
    outcomes: dict = {}

    def committer(chunk):
        def run():
            for attachment in chunk:
                try:
                    attachments_commit(
                        owner=alice,
                        ids=[attachment.pk],
                        ref=f"r:{attachment.pk}",
                        now=attachment.expires_at - timedelta(microseconds=1),
                    )
                    outcomes[attachment.pk] = "committed"
                except AttachmentInvalid as exc:
                    outcomes[attachment.pk] = exc.details[str(attachment.pk)]

        return run

    gateway = CountingGateway()

    def sweeper():
        return [sweep_expired(now=EXPIRY + DAY, gateway=gateway, lock=NoLock(), batch_size=3) for _ in range(8)]

    results = _run_threads(committer(order[0::2]), committer(order[1::2]), sweeper, sweeper)
    assert all(kind == "ok" for kind, _ in results), results

    committed = {pk for pk, outcome in outcomes.items() if outcome == "committed"}
    assert set(outcomes.values()) <= {"committed", "expired"}
    for attachment in rows:
        attachment.refresh_from_db()
        if attachment.pk in committed:
            assert attachment.lifecycle == Lifecycle.COMMITTED
            assert len(files_of(attachment)) == 2, "a committed file was deleted"
            assert attachment.storage_key not in gateway.calls
        else:
            assert attachment.lifecycle in (Lifecycle.DELETED, Lifecycle.STAGED)
    sweep_expired(now=EXPIRY + DAY, gateway=gateway)
    assert all(files_of(a) == set() for a in rows if a.pk not in committed)
    assert max(gateway.calls.values()) == 1


def _avatars(owner):
    """owner's committed avatar, and a ready replacement still staged (expiring at EXPIRY)."""
    old = make_attachment(owner, profile="avatar", lifecycle=Lifecycle.COMMITTED, created_at=T0 - DAY)
    new = make_attachment(owner, profile="avatar")
    return old, new


def test_committing_a_replacement_the_sweep_holds_is_refused_and_the_old_avatar_stays(alice):
    old, new = _avatars(alice)
    (sweep_kind, report), (commit_kind, error), _ = _commit_while_the_sweep_deletes(alice, new)

    assert sweep_kind == "ok" and report.deleted == 1
    assert commit_kind == "error" and error.details == {str(new.pk): "expired"}
    old.refresh_from_db()
    assert old.lifecycle == Lifecycle.COMMITTED and len(files_of(old)) == 3


def test_a_replacement_committed_while_the_sweep_runs_is_kept_and_the_old_avatar_goes_next_tick(alice):
    old, new = _avatars(alice)
    gateway = CountingGateway()
    (commit_kind, _), (sweep_kind, report) = _commit_open_while_a_sweep_runs(alice, new, gateway)

    assert commit_kind == "ok" and sweep_kind == "ok" and report.deleted == 0
    old.refresh_from_db()
    new.refresh_from_db()
    assert (new.lifecycle, old.lifecycle) == (Lifecycle.COMMITTED, Lifecycle.DISCARDED)
    assert len(files_of(old)) == 3  # replaced, not yet deleted: the sweep did not see the discard
    assert sweep_expired(now=EXPIRY + DAY, gateway=gateway).deleted == 1
    assert files_of(old) == set() and len(files_of(new)) == 3
