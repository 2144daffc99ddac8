"""Heartbeat: monotonic, capped at created_at + 15 days; what it cannot extend goes to `missing`."""

from __future__ import annotations

import random
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from attachments.models import Attachment, Lifecycle
from attachments.services.lifecycle import attachment_discard, attachments_heartbeat
from sweeper.schedule import sweep_if_due
from tests.sweeper.support import DAY, T0, files_of, make_attachment

pytestmark = pytest.mark.django_db

WINDOW = timedelta(days=7)
CAP = timedelta(days=15)


def _post(client, ids):
    return client.post("/api/v1/attachments/heartbeat", {"ids": ids}, format="json")


def test_heartbeat_over_the_api_extends_to_now_plus_window(alice, api):
    now = timezone.now()
    attachment = make_attachment(alice, created_at=now - 2 * DAY, files=False)
    assert attachment.expires_at == now + 5 * DAY

    response = _post(api(alice), [str(attachment.pk)])

    assert response.status_code == 200
    body = response.json()
    assert body["missing"] == []
    [entry] = body["attachments"]
    assert entry["id"] == str(attachment.pk)
    new_expiry = parse_datetime(entry["expires_at"])
    assert now + WINDOW <= new_expiry <= timezone.now() + WINDOW
    attachment.refresh_from_db()
    assert attachment.expires_at == new_expiry


def test_heartbeat_reports_committed_with_null_and_everything_else_missing(alice, bob, mallory, api):
    now = timezone.now()
    committed = make_attachment(alice, created_at=now, lifecycle=Lifecycle.COMMITTED, files=False)
    staged = make_attachment(alice, created_at=now, files=False)
    discarded = make_attachment(alice, created_at=now, lifecycle=Lifecycle.DISCARDED, expires_at=now, files=False)
    expired = make_attachment(alice, created_at=now - 8 * DAY, files=False)
    deleted = make_attachment(alice, created_at=now, lifecycle=Lifecycle.DELETED, files=False)
    bobs = make_attachment(bob, created_at=now, files=False)
    mallorys = make_attachment(mallory, created_at=now, files=False)
    unknown, malformed = str(uuid.uuid4()), "not-a-uuid"

    ids = [committed, staged, discarded, expired, deleted, bobs, mallorys]
    response = _post(api(alice), [str(a.pk) for a in ids] + [unknown, malformed])

    assert response.status_code == 200
    body = response.json()
    returned = {entry["id"]: entry["expires_at"] for entry in body["attachments"]}
    assert set(returned) == {str(committed.pk), str(staged.pk)}
    assert returned[str(committed.pk)] is None
    assert returned[str(staged.pk)] is not None
    assert set(body["missing"]) == {str(a.pk) for a in (discarded, expired, deleted, bobs, mallorys)} | {
        unknown,
        malformed,
    }
    # Nothing that was missing was extended.
    for attachment in (discarded, expired, bobs, mallorys):
        before = attachment.expires_at
        attachment.refresh_from_db()
        assert attachment.expires_at == before


@pytest.mark.parametrize("body", [{}, {"ids": []}, {"ids": "x"}, {"ids": [1]}, []])
def test_heartbeat_rejects_malformed_bodies(alice, api, body):
    response = api(alice).post("/api/v1/attachments/heartbeat", body, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "VALIDATION_ERROR"


def test_heartbeat_needs_authentication(api):
    response = _post(api(None), [str(uuid.uuid4())])
    assert response.status_code == 401


def test_heartbeat_never_moves_expiry_earlier(alice):
    attachment = make_attachment(alice, created_at=T0, files=False)
    attachments_heartbeat(user=alice, ids=[attachment.pk], now=T0 + 3 * DAY)
    attachment.refresh_from_db()
    assert attachment.expires_at == T0 + 10 * DAY

    # A heartbeat that would land earlier (a clock behind, a stale request) changes nothing.
    result = attachments_heartbeat(user=alice, ids=[attachment.pk], now=T0 + 1 * DAY)
    attachment.refresh_from_db()
    assert attachment.expires_at == T0 + 10 * DAY
    assert result.attachments == [(str(attachment.pk), T0 + 10 * DAY)]


def test_heartbeat_never_goes_past_the_hard_cap(alice):
    attachment = make_attachment(alice, created_at=T0, files=False)
    attachments_heartbeat(user=alice, ids=[attachment.pk], now=T0 + 6 * DAY)
    attachment.refresh_from_db()
    assert attachment.expires_at == T0 + 13 * DAY
    attachments_heartbeat(user=alice, ids=[attachment.pk], now=T0 + 12 * DAY)
    attachment.refresh_from_db()
    assert attachment.expires_at == T0 + CAP  # not day 19
    attachments_heartbeat(user=alice, ids=[attachment.pk], now=T0 + 14 * DAY + timedelta(hours=23))
    attachment.refresh_from_db()
    assert attachment.expires_at == T0 + CAP


def test_heartbeat_invariants_over_random_sequences(alice):
    """Whatever the order and timing of heartbeats: monotonic, capped, never past now + window."""
    rng = random.Random(20261130)
    for _ in range(20):
        created = T0 + timedelta(seconds=rng.randrange(0, 86400))
        attachment = make_attachment(alice, created_at=created, files=False)
        previous = attachment.expires_at
        for _ in range(12):
            now = created + timedelta(seconds=rng.randrange(0, int((CAP + 2 * DAY).total_seconds())))
            result = attachments_heartbeat(user=alice, ids=[attachment.pk], now=now)
            attachment.refresh_from_db()
            if previous <= now:  # expired: never revived
                assert result.missing == [str(attachment.pk)]
                assert attachment.expires_at == previous
                break
            assert attachment.expires_at >= previous
            assert attachment.expires_at <= created + CAP
            assert attachment.expires_at <= max(previous, now + WINDOW)
            assert attachment.expires_at == max(previous, min(now + WINDOW, created + CAP))
            previous = attachment.expires_at


def test_heartbeat_does_not_revive_an_expired_upload(alice):
    attachment = make_attachment(alice, created_at=T0, files=False)
    result = attachments_heartbeat(user=alice, ids=[attachment.pk], now=T0 + 7 * DAY)
    assert result.missing == [str(attachment.pk)]
    attachment.refresh_from_db()
    assert attachment.expires_at == T0 + 7 * DAY


def test_a_draft_heartbeated_daily_keeps_its_files_until_day_15_and_loses_them_after(alice, settings):
    interval = timedelta(seconds=settings.AIRLOCK_SWEEP.interval_seconds)
    draft = make_attachment(alice, created_at=T0)
    keys = files_of(draft)
    assert len(keys) == 3
    idle = make_attachment(alice, created_at=T0)  # same upload, never heartbeated: gone after day 7

    now, next_heartbeat = T0, T0 + DAY
    gone_at = idle_gone_at = None
    while now <= T0 + CAP + 2 * interval:
        if now >= next_heartbeat:
            attachments_heartbeat(user=alice, ids=[draft.pk], now=now)
            next_heartbeat += DAY
        sweep_if_due(now=now)
        if idle_gone_at is None and not files_of(idle):
            idle_gone_at = now
        if gone_at is None and not files_of(draft):
            gone_at = now
        if now < T0 + CAP:
            assert files_of(draft) == keys, f"draft lost files at {now - T0}"
        now += interval

    assert T0 + 7 * DAY <= idle_gone_at <= T0 + 7 * DAY + interval
    assert gone_at is not None and T0 + CAP <= gone_at <= T0 + CAP + interval
    draft.refresh_from_db()
    assert draft.lifecycle == Lifecycle.DELETED
    assert draft.deleted_at == gone_at


def test_discarded_ids_are_missing_from_heartbeats(alice):
    attachment = make_attachment(alice, created_at=T0, files=False)
    attachment_discard(user=alice, attachment_id=attachment.pk, now=T0 + DAY)
    result = attachments_heartbeat(user=alice, ids=[attachment.pk], now=T0 + DAY)
    assert result.missing == [str(attachment.pk)]
    assert Attachment.objects.get(pk=attachment.pk).expires_at == T0 + DAY


def test_heartbeat_extends_many_at_once_and_leaves_the_pipeline_clock_alone(alice):
    rows = [make_attachment(alice, created_at=T0 + i * timedelta(hours=1), files=False) for i in range(50)]
    Attachment.objects.update(updated_at=T0)  # what redrive_pending reads as "last progress"

    result = attachments_heartbeat(user=alice, ids=[a.pk for a in rows] + [str(rows[0].pk)], now=T0 + 3 * DAY)

    assert result.missing == []
    assert len(result.attachments) == 51  # one entry per id sent, duplicates included
    assert {exp for _, exp in result.attachments} == {T0 + 10 * DAY}
    assert set(Attachment.objects.values_list("expires_at", flat=True)) == {T0 + 10 * DAY}
    assert set(Attachment.objects.values_list("updated_at", flat=True)) == {T0}
