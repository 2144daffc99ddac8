"""A hard-deleted attachment leaves a tombstone (identity, digest, final state, times, its whole history)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from attachments.models import Attachment, Lifecycle, Tombstone, TransitionLog
from attachments.services import hard_delete
from sweeper.sweep import sweep_expired
from tests.support import client_for, jpeg_bytes, run_pipeline, upload
from tests.sweeper.support import DAY, T0, make_attachment

pytestmark = pytest.mark.django_db


def test_a_purged_file_leaves_a_tombstone_with_its_story(alice, settings):
    client = client_for(alice)
    pk = upload(client, jpeg_bytes())
    assert run_pipeline(pk) == "ready"
    assert client.post(f"/api/v1/attachments/{pk}/discard").status_code == 204
    row = Attachment.objects.get(pk=pk)
    later = timezone.now() + timedelta(hours=1)
    sweep_expired(now=later)
    deleted_at = Attachment.objects.get(pk=pk).deleted_at
    assert deleted_at is not None

    report = sweep_expired(now=later + timedelta(days=settings.AIRLOCK_RETENTION_DAYS.audit_window, minutes=1))

    assert report.hard_deleted == 1
    assert not Attachment.objects.filter(pk=pk).exists()
    assert not TransitionLog.objects.filter(attachment_id=pk).exists()  # the rows went with it…
    stone = Tombstone.objects.get(attachment_id=pk)
    assert (stone.tenant_id, stone.tenant_slug, stone.owner_id) == (row.tenant_id, "acme", alice.pk)
    assert (stone.storage_key, stone.sha256, stone.size) == (row.storage_key, row.sha256, row.size)
    assert len(stone.sha256) == 64
    assert (stone.status, stone.reason_code, stone.lifecycle) == ("ready", "", Lifecycle.DELETED)
    assert (stone.created_at, stone.ready_at, stone.deleted_at) == (row.created_at, row.ready_at, deleted_at)
    assert stone.purged_by == "system:purge"
    # …and the whole story stayed: who did what, in order
    story = [(e["event"], e["actor"]) for e in stone.history]
    assert story == [
        ("intent", "user:alice"),
        ("arrived", "worker"),
        ("scan", "worker"),  # intake ran the scan, recorded with the start
        ("start", "worker"),
        ("finish", "worker"),
        ("discard", "user:alice"),
        ("sweep_delete", "system:sweep"),
    ], story
    assert stone.history_total == 7
    assert stone.history[1]["details"]["stored_size"] == row.stored_size


def test_tombstones_are_written_one_insert_per_batch(alice, settings):
    rows = [make_attachment(alice, files=False, lifecycle=Lifecycle.DELETED, deleted_at=T0) for _ in range(12)]
    for row in rows:
        TransitionLog.objects.bulk_create(
            [
                TransitionLog(
                    attachment=row,
                    transition="sweep_delete",
                    from_status="discarded",
                    to_status="deleted",
                    actor="system:sweep",
                )
            ]
        )
    with CaptureQueriesContext(connection) as queries:
        report = sweep_expired(now=T0 + (settings.AIRLOCK_RETENTION_DAYS.audit_window + 1) * DAY, batch_size=5)
    assert report.hard_deleted == 12
    inserts = [q["sql"] for q in queries.captured_queries if q["sql"].startswith('INSERT INTO "attachments_tombstone"')]
    assert len(inserts) == 3, inserts  # 5 + 5 + 2, never one per row
    assert Tombstone.objects.count() == 12
    assert all(stone.history_total == 1 for stone in Tombstone.objects.all())


def test_a_long_history_is_kept_whole_with_repeats_folded_and_big_details_sized(alice, settings):
    row = make_attachment(alice, files=False, lifecycle=Lifecycle.DELETED, deleted_at=T0)

    def entry(i: int, transition: str, **fields) -> TransitionLog:
        return TransitionLog(attachment=row, transition=transition, actor="user:alice", **fields)

    distinct = [entry(i, "legal_hold" if i % 2 else "legal_hold_cleared", details={"n": i}) for i in range(120)]
    rescans = [
        entry(120 + i, "rescan", from_status="ready", to_status="ready", details={"n": 120 + i}) for i in range(30)
    ]
    big = entry(150, "scan", details={"report": "x" * 5000})
    TransitionLog.objects.bulk_create([*distinct, *rescans, big])
    TransitionLog.objects.filter(attachment=row).update(created_at=T0)  # one instant: the id orders them

    sweep_expired(now=T0 + (settings.AIRLOCK_RETENTION_DAYS.audit_window + 1) * DAY)
    stone = Tombstone.objects.get(attachment_id=row.pk)
    assert stone.history_total == 151
    # every one of the 120 alternating entries, in order; the 30 rescans as one entry; the scan's details sized
    assert [e["details"]["n"] for e in stone.history[:120]] == list(range(120))
    folded, sized = stone.history[120:]
    assert (folded["event"], folded["count"], folded["details"]["n"]) == ("rescan", 30, 120)
    assert "until" in folded
    assert sized["event"] == "scan" and sized["details"]["omitted_bytes"] > hard_delete.TOMBSTONE_DETAILS_BYTES


def test_a_dry_run_and_the_killswitch_write_no_tombstone(alice, settings):
    from sweeper.control import sweeper_control_set

    make_attachment(alice, files=False, lifecycle=Lifecycle.DELETED, deleted_at=T0)
    now = T0 + (settings.AIRLOCK_RETENTION_DAYS.audit_window + 1) * DAY
    assert sweep_expired(now=now, dry_run=True).hard_deleted == 1
    sweeper_control_set(killswitch=True, actor="test")
    sweep_expired(now=now)
    assert not Tombstone.objects.exists() and Attachment.objects.count() == 1


def test_a_deleted_row_whose_ref_is_held_since_is_not_purged(alice, settings):
    """A hold placed after the delete keeps the row (the record of what was there); the others still go."""
    from attachments.retention.services.holds import ref_hold_clear, ref_hold_set
    from sweeper.purge import purge_deleted

    held = make_attachment(alice, files=False, lifecycle=Lifecycle.DELETED, deleted_at=T0)
    other = make_attachment(alice, files=False, lifecycle=Lifecycle.DELETED, deleted_at=T0)
    Attachment.objects.filter(pk=held.pk).update(ref="case:7")
    Attachment.objects.filter(pk=other.pk).update(ref="case:8")
    ref_hold_set(tenant="acme", ref="case:7", actor="staff:root", reason="litigation")
    after = T0 + timedelta(days=settings.AIRLOCK_RETENTION_DAYS.audit_window) + DAY

    assert purge_deleted(now=after, batch_size=10) == 1
    assert Attachment.objects.filter(pk=held.pk).exists() and not Attachment.objects.filter(pk=other.pk).exists()
    ref_hold_clear(tenant="acme", ref="case:7", actor="staff:root")
    assert purge_deleted(now=after, batch_size=10) == 1
    assert not Attachment.objects.filter(pk=held.pk).exists()
