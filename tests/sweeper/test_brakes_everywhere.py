"""The brakes hold every automated delete: reconcile's and the unauthorized-upload delete, not only the sweep's."""

from __future__ import annotations

import json
import os
import uuid
from io import StringIO

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.utils import timezone

from attachments.models import Lifecycle, StorageEvent
from attachments.naming import quarantine_key
from attachments.storage import get_gateway
from attachments.uploads.services.uploads import object_arrived
from sweeper import reconcile as reconcile_module
from sweeper.control import sweeper_control_set
from sweeper.models import ReconcileRun
from sweeper.reconcile import reconcile_storage
from tests.sweeper.support import files_of, make_attachment, storage_snapshot

pytestmark = pytest.mark.django_db


def _old(root, key: str, days: float) -> str:
    get_gateway().write_chunks(key, [b"bytes"])
    stamp = timezone.now().timestamp() - days * 86400
    os.utime(root / key, (stamp, stamp))
    return key


@pytest.fixture
def drift(alice, storage_root):
    """One of each deletable class: an orphan, a deleted row's leftover, expired quarantine."""
    leftover = make_attachment(
        alice, lifecycle=Lifecycle.DELETED, deleted_at=timezone.now(), thumbnail=False, served=False
    )
    return sorted(
        [
            _old(storage_root, f"tenants/acme/image/{uuid.uuid4()}", 2),
            _old(storage_root, quarantine_key(f"tenants/acme/image/{uuid.uuid4()}"), 40),
            *files_of(leftover),
        ]
    )


def _pull(brake: str, how: str, settings) -> None:
    if how == "database":
        sweeper_control_set(**{brake: True}, actor="test")
    else:
        setattr(settings, f"AIRLOCK_SWEEPER_{brake.upper()}", "1")


@pytest.mark.parametrize("how", ["database", "settings"])
def test_reconcile_under_the_killswitch_deletes_nothing_and_says_why(drift, storage_root, settings, how):
    _pull("killswitch", how, settings)
    files = storage_snapshot(storage_root)

    report = reconcile_storage(quarantine_orphans=False)

    assert storage_snapshot(storage_root) == files
    assert report.mode == "killswitch"
    assert sorted(f.key for f in report.findings if f.action == "kept") == drift
    assert "killswitch on: nothing deleted" in report.summary_lines()[0]
    run = ReconcileRun.objects.get()
    assert (run.mode, run.kept, run.objects_deleted) == ("killswitch", 3, 0)
    assert run.note == "killswitch on: nothing deleted" and run.finished_at is not None


def test_reconcile_quarantining_orphans_is_held_too(drift, storage_root):
    sweeper_control_set(killswitch=True, actor="test")
    files = storage_snapshot(storage_root)
    reconcile_storage(quarantine_orphans=True)
    assert storage_snapshot(storage_root) == files


@pytest.mark.parametrize("how", ["database", "settings"])
def test_reconcile_under_dry_run_records_the_keys_on_its_run(drift, storage_root, settings, how):
    _pull("dry_run", how, settings)
    files = storage_snapshot(storage_root)

    report = reconcile_storage()

    assert storage_snapshot(storage_root) == files
    run = ReconcileRun.objects.get()
    assert run.mode == "dry_run" and sorted(run.would_delete) == drift == sorted(report.would_delete)
    assert run.objects_deleted == 0


def test_a_killswitch_pulled_mid_run_holds_the_rest(alice, storage_root, monkeypatch):
    keys = [_old(storage_root, f"tenants/acme/image/{uuid.uuid4()}", 2) for _ in range(4)]
    monkeypatch.setattr(reconcile_module, "_CHUNK", 2)
    real = reconcile_module._Reconciler.classify
    seen = []

    def classify(self, info, row):
        seen.append(info.key)
        real(self, info, row)
        if len(seen) == 2:
            sweeper_control_set(killswitch=True, actor="staff:ops")

    monkeypatch.setattr(reconcile_module._Reconciler, "classify", classify)
    report = reconcile_storage()
    assert [f.action for f in report.findings] == ["deleted", "deleted", "kept", "kept"]
    assert sum(get_gateway().head(k) is not None for k in keys) == 2
    assert ReconcileRun.objects.get().mode == "killswitch"


def test_reconcile_runs_are_recorded_normally_too(drift, storage_root):
    report = reconcile_storage()
    run = ReconcileRun.objects.get(pk=report.run_id)
    assert (run.mode, run.objects_deleted, run.counts["orphan"]) == ("normal", 3, 1)
    assert not any(get_gateway().head(k) for k in drift)


def test_the_command_says_the_killswitch_held_its_deletes(drift, storage_root):
    sweeper_control_set(killswitch=True, actor="test")
    out = StringIO()
    call_command("reconcile", "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert data["mode"] == "killswitch" and {f["action"] for f in data["findings"]} == {"kept"}
    assert all(get_gateway().head(k) for k in drift)


@pytest.mark.parametrize(("brake", "deleted"), [(None, True), ("killswitch", False), ("dry_run", False)])
def test_an_upload_nobody_authorized_obeys_the_brakes(alice, brake, deleted, django_capture_on_commit_callbacks):
    if brake:
        sweeper_control_set(**{brake: True}, actor="test")
    key = f"tenants/acme/image/{uuid.uuid4()}"
    get_gateway().write_chunks(key, [b"GIF89a rogue"])
    with django_capture_on_commit_callbacks(execute=True):
        arrival = object_arrived(key=key, size=12, source="webhook", dedupe_key=f"w:{key}", event_name="x")
    assert arrival.outcome == "unknown_key"
    assert (get_gateway().head(key) is None) is deleted
    assert StorageEvent.objects.get(key=key).outcome == ("unknown_key" + (f":{brake}" if brake else ""))


def test_attachments_reads_the_sweepers_brakes_through_the_registered_reader(settings, monkeypatch):
    from attachments import brakes

    settings.AIRLOCK_SWEEPER_KILLSWITCH = None
    settings.AIRLOCK_SWEEPER_DRY_RUN = None
    assert brakes.delete_brake() == ""
    sweeper_control_set(killswitch=True, actor="test")
    assert brakes.delete_brake() == "killswitch"
    sweeper_control_set(killswitch=False, dry_run=True, actor="test")
    assert brakes.delete_brake() == "dry_run"
    monkeypatch.setattr(brakes, "_reader", None)  # nothing registered: refuse rather than delete
    with pytest.raises(ImproperlyConfigured):
        brakes.delete_brake()
