"""Killswitch and dry run: stored in the database, overridable by settings, leave everything intact."""

from __future__ import annotations

import pytest

from attachments.models import Attachment, Lifecycle
from sweeper.control import sweeper_control_get, sweeper_control_set
from sweeper.models import SweeperControl, SweepRun
from sweeper.sweep import sweep_expired
from tests.sweeper.support import (
    DAY,
    T0,
    CountingGateway,
    all_keys,
    make_attachment,
    storage_snapshot,
)

pytestmark = pytest.mark.django_db

LATER = T0 + 8 * DAY


def _rows() -> list[tuple]:
    return list(Attachment.objects.order_by("pk").values_list("pk", "lifecycle", "delete_attempts", "deleted_at"))


def test_control_defaults_off_and_records_who_changed_it(alice):
    state = sweeper_control_get()
    assert (state.killswitch, state.dry_run, state.killswitch_source) == (False, False, "database")

    state = sweeper_control_set(killswitch=True, actor="admin:ops")

    assert state.killswitch and not state.dry_run
    assert state.changed_by == "admin:ops" and state.changed_at is not None
    row = SweeperControl.objects.get()
    assert row.pk == 1 and row.killswitch
    sweeper_control_set(dry_run=True, actor="admin:other")
    assert sweeper_control_get().killswitch is True  # None left it alone
    assert sweeper_control_get().to_dict()["changed_by"] == "admin:other"
    with pytest.raises(ValueError):
        sweeper_control_set(killswitch=False, actor="")


@pytest.mark.parametrize(
    ("setting", "stored", "expected"),
    [
        ("1", False, True),
        ("0", True, False),
        ("true", False, True),
        (None, True, True),
        ("", True, True),
        ("garbage", False, True),  # a value set but not understood fails safe: the brake is on
    ],
)
def test_settings_override_the_database(settings, setting, stored, expected):
    sweeper_control_set(killswitch=stored, dry_run=stored, actor="test")
    settings.AIRLOCK_SWEEPER_KILLSWITCH = setting
    settings.AIRLOCK_SWEEPER_DRY_RUN = setting
    state = sweeper_control_get()
    assert state.killswitch is expected and state.dry_run is expected
    source = "database" if setting in (None, "") else "settings"
    assert state.killswitch_source == source and state.dry_run_source == source


@pytest.mark.parametrize("how", ["database", "settings"])
def test_killswitch_leaves_storage_and_rows_untouched(alice, storage_root, settings, how):
    for _ in range(3):
        make_attachment(alice)
    make_attachment(alice, lifecycle=Lifecycle.DISCARDED, expires_at=T0)
    if how == "database":
        sweeper_control_set(killswitch=True, actor="test")
    else:
        settings.AIRLOCK_SWEEPER_KILLSWITCH = "1"
    files, rows = storage_snapshot(storage_root), _rows()
    gateway = CountingGateway()

    report = sweep_expired(now=LATER + 60 * DAY, gateway=gateway)

    assert report.mode == "killswitch" and report.selected == 0
    assert not gateway.calls
    assert storage_snapshot(storage_root) == files and _rows() == rows
    assert SweepRun.objects.get().mode == "killswitch"


@pytest.mark.parametrize("how", ["database", "settings", "argument"])
def test_dry_run_records_every_key_and_deletes_nothing(alice, storage_root, settings, how):
    attachments = [
        make_attachment(alice, quarantined=True),
        make_attachment(alice),
        make_attachment(alice, lifecycle=Lifecycle.DISCARDED, expires_at=T0),
    ]
    make_attachment(alice, lifecycle=Lifecycle.COMMITTED)
    if how == "database":
        sweeper_control_set(dry_run=True, actor="test")
    elif how == "settings":
        settings.AIRLOCK_SWEEPER_DRY_RUN = "1"
    files, rows = storage_snapshot(storage_root), _rows()
    gateway = CountingGateway()

    report = sweep_expired(now=LATER, gateway=gateway, dry_run=how == "argument", batch_size=2)

    expected = sorted(k for a in attachments for k in all_keys(a))
    assert report.mode == "dry_run" and report.selected == 3 and report.deleted == 0
    assert sorted(report.would_delete) == expected
    assert not gateway.calls
    assert storage_snapshot(storage_root) == files and _rows() == rows
    run = SweepRun.objects.get()
    assert run.mode == "dry_run" and sorted(run.would_delete) == expected


def test_killswitch_wins_over_dry_run(alice):
    make_attachment(alice)
    sweeper_control_set(killswitch=True, dry_run=True, actor="test")
    assert sweep_expired(now=LATER).mode == "killswitch"


def test_a_brake_pulled_mid_run_stops_deletes_after_the_current_batch(alice, settings):
    for i in range(6):
        make_attachment(alice, thumbnail=False, served=False, created_at=T0 + i * DAY / 100)
    calls = []

    def pull_brake(key: str) -> None:
        # Runs in a delete worker thread: no database here, so the operator pulls the settings brake.
        calls.append(key)
        settings.AIRLOCK_SWEEPER_KILLSWITCH = "1"

    report = sweep_expired(now=LATER, gateway=CountingGateway(on_delete=pull_brake), batch_size=2)

    assert report.stopped == "killswitch"
    assert report.deleted == 2 and len(calls) == 2
    assert Attachment.objects.filter(lifecycle=Lifecycle.STAGED).count() == 4


def test_a_brake_pulled_during_the_last_reap_batch_holds_the_purges_after_it(alice, settings):
    """The last batch is a short one; the purges that follow it are deletes too."""
    make_attachment(alice, thumbnail=False, served=False)  # due: the one reap batch, short
    gone = [make_attachment(alice, files=False, lifecycle=Lifecycle.DELETED, deleted_at=T0) for _ in range(3)]

    def pull_brake(key: str) -> None:
        settings.AIRLOCK_SWEEPER_KILLSWITCH = "1"

    later = T0 + (settings.AIRLOCK_RETENTION_DAYS.audit_window + 1) * DAY
    report = sweep_expired(now=later, gateway=CountingGateway(on_delete=pull_brake), batch_size=2)

    assert report.stopped == "killswitch" and report.hard_deleted == 0
    assert Attachment.objects.filter(pk__in=[a.pk for a in gone]).count() == 3


def test_purge_stops_at_a_brake_pulled_between_its_batches(alice, settings, monkeypatch):
    from sweeper import purge

    for _ in range(4):
        make_attachment(alice, files=False, lifecycle=Lifecycle.DELETED, deleted_at=T0)
    real, batches = purge.attachments_hard_delete, []

    def delete_then_pull(**kwargs):
        batches.append(real(**kwargs))
        settings.AIRLOCK_SWEEPER_KILLSWITCH = "1"
        return batches[-1]

    monkeypatch.setattr(purge, "attachments_hard_delete", delete_then_pull)
    later = T0 + (settings.AIRLOCK_RETENTION_DAYS.audit_window + 1) * DAY
    assert purge.purge_deleted(now=later, batch_size=2) == 2
    assert batches == [2] and Attachment.objects.count() == 2


def test_an_erasure_stops_at_a_brake_pulled_between_its_batches(alice, settings):
    from attachments.retention.services.erasure import erasure_scope_user
    from sweeper.erasure import erase

    for i in range(6):
        make_attachment(alice, thumbnail=False, served=False, created_at=T0 + i * DAY / 100)
    settings.AIRLOCK_SWEEP = settings.AIRLOCK_SWEEP.replace(batch=2)
    calls = []

    def pull_brake(key: str) -> None:
        calls.append(key)
        settings.AIRLOCK_SWEEPER_KILLSWITCH = "1"

    report = erase(erasure_scope_user("alice"), actor="staff:root", gateway=CountingGateway(on_delete=pull_brake))

    assert report.deferred == "killswitch" and report.files_removed == 2 and len(calls) == 2
    assert Attachment.objects.filter(lifecycle=Lifecycle.DELETED).count() == 2  # the rest stay due


def test_the_stored_killswitch_is_read_between_batches(alice, monkeypatch):
    """The admin's toggle (a database write) is seen by a run in progress."""
    from sweeper import reaping

    for _ in range(6):
        make_attachment(alice, thumbnail=False, served=False)
    real_reap = reaping.reap_batch
    batches = []

    def reap_then_toggle(**kwargs):
        result = real_reap(**kwargs)
        batches.append(result.selected)
        sweeper_control_set(killswitch=True, actor="admin:panic")  # same thread, same connection
        return result

    monkeypatch.setattr("sweeper.sweep.reap_batch", reap_then_toggle)
    report = sweep_expired(now=LATER, batch_size=2)
    assert report.stopped == "killswitch" and batches == [2] and report.deleted == 2


def test_dry_run_switched_on_mid_run_stops_a_normal_run(alice, settings):
    for _ in range(4):
        make_attachment(alice, thumbnail=False, served=False)

    def engage(key: str) -> None:
        settings.AIRLOCK_SWEEPER_DRY_RUN = "1"

    report = sweep_expired(now=LATER, gateway=CountingGateway(on_delete=engage), batch_size=2)
    assert report.stopped == "dry_run" and report.deleted == 2
