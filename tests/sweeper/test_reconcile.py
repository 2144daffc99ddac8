"""Reconciliation finds each class of drift, repairs it, and reports it (or only reports, in a dry run)."""

from __future__ import annotations

import json
import os
import uuid
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from attachments.models import (
    Attachment,
    Lifecycle,
    OutboxMessage,
    Status,
    StorageEvent,
)
from attachments.naming import quarantine_key
from attachments.storage import get_gateway
from sweeper import reconcile
from sweeper.locks import DatabaseLock
from sweeper.reconcile import reconcile_storage
from tests.sweeper.support import files_of, make_attachment, storage_snapshot

pytestmark = pytest.mark.django_db

HOUR = 3600


def _put(root, key: str, *, age_seconds: float = 0) -> str:
    get_gateway().write_chunks(key, [b"bytes"])
    if age_seconds:
        _age(root, key, age_seconds)
    return key


def _age(root, key: str, seconds: float) -> None:
    stamp = timezone.now().timestamp() - seconds
    os.utime(root / key, (stamp, stamp))


def _age_files(root, attachment, seconds: float) -> None:
    for key in files_of(attachment):
        _age(root, key, seconds)


def _exists(key: str) -> bool:
    return get_gateway().head(key) is not None


def _leased(alice, now, expires_at) -> Attachment:
    """A row in processing whose lease runs out at expires_at."""
    return make_attachment(
        alice,
        created_at=now,
        status=Status.PROCESSING,
        files=False,
        lease_token=uuid.uuid4(),
        lease_expires_at=expires_at,
    )


def _never_arrived(alice, created_at) -> Attachment:
    """A pending row with its original in storage but no arrival recorded (no upload event yet)."""
    return make_attachment(
        alice, created_at=created_at, status=Status.PENDING, uploaded_at=None, thumbnail=False, served=False
    )


def test_orphans_past_the_grace_window_are_deleted_younger_ones_kept(alice, storage_root, settings):
    grace = reconcile.GRACE_SECONDS
    live = make_attachment(alice, created_at=timezone.now())
    _age_files(storage_root, live, 10 * grace)
    old = _put(storage_root, f"tenants/acme/image/{uuid.uuid4()}", age_seconds=grace + 60)
    odd = _put(storage_root, "tenants/acme/image/leftover-tmp", age_seconds=grace + 60)
    stray_derivative = _put(storage_root, f"tenants/acme/derivatives/{live.pk}/sanitized.png", age_seconds=grace + 60)
    young = _put(storage_root, f"tenants/acme/image/{uuid.uuid4()}", age_seconds=grace - 60)

    report = reconcile_storage()

    assert report.counts()["orphan"] == 3
    assert {f.key for f in report.findings if f.kind == "orphan"} == {old, odd, stray_derivative}
    assert all(f.action == "deleted" for f in report.findings)
    assert not any(map(_exists, (old, odd, stray_derivative)))
    assert _exists(young)
    assert len(files_of(live)) == 3  # a live row's files are never touched, however old
    assert report.scanned == 7


def test_orphans_can_go_to_quarantine_instead(storage_root, settings):
    key = _put(storage_root, f"tenants/acme/image/{uuid.uuid4()}", age_seconds=reconcile.GRACE_SECONDS + 60)
    report = reconcile_storage(quarantine_orphans=True)
    assert [(f.kind, f.action) for f in report.findings] == [("orphan", "quarantined")]
    assert not _exists(key) and _exists(quarantine_key(key))


def test_objects_of_rows_marked_deleted_are_deleted_again(alice, storage_root):
    swept = make_attachment(alice, lifecycle=Lifecycle.DELETED, deleted_at=timezone.now())
    leftovers = files_of(swept)  # e.g. written by a worker after the sweep, or a delete that lied

    report = reconcile_storage()

    assert {f.key for f in report.findings if f.kind == "deleted_leftover"} == leftovers
    assert files_of(swept) == set()


def test_quarantine_older_than_its_retention_is_deleted(alice, storage_root, settings):
    days = settings.AIRLOCK_RETENTION_DAYS.quarantine
    rejected = make_attachment(
        alice, created_at=timezone.now(), status=Status.REJECTED, quarantined=True, thumbnail=False, served=False
    )
    recent = rejected.quarantine_key
    old = _put(storage_root, quarantine_key(f"tenants/acme/image/{uuid.uuid4()}"), age_seconds=(days + 1) * 86400)
    young_orphan = _put(
        storage_root, quarantine_key(f"tenants/acme/image/{uuid.uuid4()}"), age_seconds=(days - 1) * 86400
    )

    report = reconcile_storage()

    assert [(f.kind, f.key) for f in report.findings] == [("quarantine_expired", old)]
    assert not _exists(old) and _exists(recent) and _exists(young_orphan)


def test_a_lost_arrival_is_recorded_and_enqueued(alice, storage_root, settings):
    grace = reconcile.GRACE_SECONDS
    now = timezone.now()
    lost = _never_arrived(alice, now)
    _age_files(storage_root, lost, grace + 60)
    in_flight = _never_arrived(alice, now)  # its event may still be on its way
    expired = _never_arrived(alice, now - timedelta(days=8))
    _age_files(storage_root, expired, grace + 60)  # the sweeper's, not processing's

    report = reconcile_storage()

    assert [(f.kind, f.attachment_id, f.action) for f in report.findings] == [("arrived", str(lost.pk), "enqueued")]
    lost.refresh_from_db()
    assert lost.uploaded_at is not None
    assert StorageEvent.objects.get(source="reconcile").attachment_id == lost.pk
    assert OutboxMessage.objects.filter(actor_name="intake", args__0=str(lost.pk)).exists()
    assert Attachment.objects.get(pk=in_flight.pk).uploaded_at is None


def test_expired_leases_go_back_to_pending(alice):
    now = timezone.now()
    stuck = _leased(alice, now, now - timedelta(minutes=1))
    running = _leased(alice, now, now + timedelta(minutes=5))

    report = reconcile_storage(now=now)

    assert report.expired_leases == 1
    stuck.refresh_from_db()
    assert stuck.status == Status.PENDING and stuck.attempts == 1
    assert Attachment.objects.get(pk=running.pk).status == Status.PROCESSING


def test_pending_rows_whose_job_went_missing_are_redriven(alice):
    now = timezone.now()
    forgotten = make_attachment(alice, created_at=now, status=Status.PENDING, files=False)
    Attachment.objects.filter(pk=forgotten.pk).update(updated_at=now - timedelta(hours=1))

    report = reconcile_storage(now=now)

    assert report.redriven == 1
    assert OutboxMessage.objects.filter(actor_name="intake", args__0=str(forgotten.pk)).exists()


def test_a_job_parked_behind_an_expired_slot_is_sent_again_when_ticks_run_from_cron(monkeypatch, settings):
    """`reconcile` stands in for the scheduler tick there (tests/pipeline/test_expired_slot_wake.py)."""
    import time

    from processing import tenant_slots

    settings.AIRLOCK_CONCURRENCY = settings.AIRLOCK_CONCURRENCY.replace(tenant=1)
    slots = tenant_slots.MemorySlots()
    monkeypatch.setattr(tenant_slots.backend, "value", slots)
    opts = {"limit": 1, "park_ttl_ms": 60_000}
    assert slots.acquire_or_park("7", "release-lost", "unused", ttl_ms=50, **opts)
    file_id, token = str(uuid.uuid4()), str(uuid.uuid4())
    assert not slots.acquire_or_park(
        "7", "h", tenant_slots.encode((file_id, token, "7", "derive")), ttl_ms=60_000, **opts
    )
    time.sleep(0.12)

    reconcile_storage(dry_run=True)
    assert slots.parked_files("7") == {file_id}  # a dry run changes nothing
    reconcile_storage()
    assert OutboxMessage.objects.filter(actor_name="derive", args=[file_id, token, "7"]).count() == 1
    assert slots.parked_files("7") == set()


def test_a_dry_run_reports_every_class_and_changes_nothing(alice, storage_root, settings):
    grace = reconcile.GRACE_SECONDS
    now = timezone.now()
    _put(storage_root, f"tenants/acme/image/{uuid.uuid4()}", age_seconds=grace + 60)
    make_attachment(alice, lifecycle=Lifecycle.DELETED, deleted_at=now, thumbnail=False, served=False)
    _put(storage_root, quarantine_key(f"tenants/acme/image/{uuid.uuid4()}"), age_seconds=40 * 86400)
    lost = _never_arrived(alice, now)
    _age_files(storage_root, lost, grace + 60)
    stuck = _leased(alice, now, now - timedelta(minutes=1))
    files = storage_snapshot(storage_root)
    rows = list(Attachment.objects.order_by("pk").values())

    report = reconcile_storage(dry_run=True)

    assert report.counts() == {
        "orphan": 1,
        "deleted_leftover": 1,
        "quarantine_expired": 1,
        "arrived": 1,
        "missing_originals": 0,
        "missing_originals_failed": 0,
        "missing_derivatives": 0,
        "missing_derivatives_regenerated": 0,
        "missing_variants": 0,
        "missing_variants_dropped": 0,
        "orphan_multipart_found": 0,
        "orphan_multipart_aborted": 0,
    }
    assert {f.action for f in report.findings} == {"would_delete", "would_enqueue"}
    assert report.expired_leases == 1
    assert storage_snapshot(storage_root) == files
    assert list(Attachment.objects.order_by("pk").values()) == rows
    assert not OutboxMessage.objects.exists() and not StorageEvent.objects.exists()
    assert Attachment.objects.get(pk=stuck.pk).status == Status.PROCESSING


def test_two_runs_cannot_overlap(storage_root, settings):
    key = _put(storage_root, f"tenants/acme/image/{uuid.uuid4()}", age_seconds=reconcile.GRACE_SECONDS + 60)
    holder = DatabaseLock("reconcile")
    assert holder.acquire()
    report = reconcile_storage(lock=DatabaseLock("reconcile"))
    assert report.lock_busy and not report.findings and _exists(key)
    assert "another run" in report.summary_lines()[0]


def test_the_command_prints_a_summary_or_json(storage_root, settings):
    key = _put(storage_root, f"tenants/acme/image/{uuid.uuid4()}", age_seconds=reconcile.GRACE_SECONDS + 60)

    out = StringIO()
    call_command("reconcile", "--dry-run", stdout=out)
    assert "orphan 1" in out.getvalue() and key in out.getvalue() and "would_delete" in out.getvalue()
    assert _exists(key)

    out = StringIO()
    call_command("reconcile", "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert data["counts"]["orphan"] == 1 and data["findings"][0]["action"] == "deleted"
    assert not _exists(key)
