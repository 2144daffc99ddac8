"""A file's audit timeline is kept as long as the file, then as long as its tombstone; heartbeats stay one row.

The retention purge has no window for TransitionLog: a live file's history of
any age stays, so does a legally held one's; a hard-deleted file's goes whole
into its tombstone, and leaves when the tombstone's window ends.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from attachments.models import Attachment, Lifecycle, Tombstone, TransitionLog
from attachments.retention.services.holds import attachment_hold_set
from attachments.services.lifecycle import attachments_heartbeat
from sweeper.sweep import sweep_expired
from tests.sweeper.support import DAY, T0, make_attachment

pytestmark = pytest.mark.django_db


def _history(row: Attachment, *, at, n: int = 5) -> None:
    TransitionLog.objects.bulk_create(
        [
            TransitionLog(
                attachment=row, transition="rescan", from_status="ready", to_status="ready", actor="system:rescan"
            )
        ]
        + [
            TransitionLog(attachment=row, transition=t, from_status="", to_status="", actor="user:alice")
            for t in ("intent", "arrived", "scan", "staff_download")[: n - 1]
        ]
    )
    TransitionLog.objects.filter(attachment=row).update(created_at=at)


def test_a_live_files_100_day_old_history_is_kept(alice):
    now = T0 + 120 * DAY
    row = make_attachment(alice, lifecycle=Lifecycle.COMMITTED, files=False)
    _history(row, at=now - 100 * DAY)
    young = make_attachment(alice, lifecycle=Lifecycle.COMMITTED, files=False)
    _history(young, at=now - DAY)

    report = sweep_expired(now=now)
    assert "transition_logs" not in report.purged
    assert TransitionLog.objects.filter(attachment=row).count() == 5
    assert TransitionLog.objects.filter(attachment=young).count() == 5
    # Years later the file is still live, and so is its story.
    sweep_expired(now=now + 3 * 365 * DAY)
    assert TransitionLog.objects.filter(attachment=row).count() == 5


def test_a_held_files_history_outlives_every_window(alice, settings):
    row = make_attachment(alice, files=False)  # an abandoned draft: expired after a week, but held
    _history(row, at=T0)
    attachment_hold_set(attachment_ids=[row.pk], actor="staff:root", reason="litigation")
    later = T0 + (settings.AIRLOCK_RETENTION_DAYS.tombstones + settings.AIRLOCK_RETENTION_DAYS.audit_window + 100) * DAY
    sweep_expired(now=later)
    sweep_expired(now=later + DAY)
    assert Attachment.objects.filter(pk=row.pk).exists() and not Tombstone.objects.filter(attachment_id=row.pk)
    events = list(TransitionLog.objects.filter(attachment=row).values_list("transition", flat=True))
    assert events.count("legal_hold") == 1 and len(events) == 6


def test_history_goes_whole_into_the_tombstone_and_leaves_with_it(alice, settings):
    row = make_attachment(alice, files=False, lifecycle=Lifecycle.DELETED, deleted_at=T0 + 200 * DAY)
    _history(row, at=T0)  # written 200 days before the delete: older than any former window
    purge_at = T0 + (200 + settings.AIRLOCK_RETENTION_DAYS.audit_window + 1) * DAY
    assert sweep_expired(now=purge_at).hard_deleted == 1
    stone = Tombstone.objects.get(attachment_id=row.pk)
    assert [e["event"] for e in stone.history] == ["rescan", "intent", "arrived", "scan", "staff_download"]
    assert stone.history_total == 5 and not TransitionLog.objects.filter(attachment_id=row.pk).exists()

    sweep_expired(now=purge_at + (settings.AIRLOCK_RETENTION_DAYS.tombstones - 1) * DAY)
    assert Tombstone.objects.filter(attachment_id=row.pk).exists()
    sweep_expired(now=purge_at + (settings.AIRLOCK_RETENTION_DAYS.tombstones + 1) * DAY)
    assert not Tombstone.objects.filter(attachment_id=row.pk).exists()


def test_a_draft_heartbeated_every_half_hour_until_its_cap_keeps_one_heartbeat_row(alice, settings):
    row = make_attachment(alice, files=False, created_at=T0)
    original = row.expires_at
    now = T0
    while now < T0 + timedelta(seconds=settings.AIRLOCK_LIFECYCLE_SECONDS.hard_cap) - DAY:
        attachments_heartbeat(user=alice, ids=[row.pk], now=now)
        now += timedelta(minutes=30)
    rows = list(TransitionLog.objects.filter(attachment=row))
    assert [r.transition for r in rows] == ["heartbeat"], [r.transition for r in rows]
    [beat] = rows
    row.refresh_from_db()
    # 8 days of extensions, each hour of expiry gained recorded once, all in the one row
    assert beat.details["count"] >= 8 * 24
    # the expiry before the first recorded extension (the first to cross an hour of expiry)
    assert original <= datetime.fromisoformat(beat.details["was"]) < original + timedelta(hours=1)
    assert beat.details["expires_at"] == row.expires_at.isoformat() and "since" in beat.details
