"""Discard, discard-all and logout: due at once, reaped on the sweeper's next tick."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from attachments.models import Attachment, Lifecycle
from attachments.services.lifecycle import attachment_discard, attachments_discard_all
from sweeper.schedule import sweep_if_due
from sweeper.sweep import sweep_expired
from tests.sweeper.support import DAY, T0, files_of, make_attachment

pytestmark = pytest.mark.django_db


def _discard(client, attachment_id):
    return client.post(f"/api/v1/attachments/{attachment_id}/discard", format="json")


def test_discard_marks_it_due_now_and_is_idempotent(alice, api):
    attachment = make_attachment(alice, created_at=timezone.now(), files=False)
    before = timezone.now()

    first = _discard(api(alice), attachment.pk)
    second = _discard(api(alice), attachment.pk)

    assert first.status_code == 204 and second.status_code == 204
    attachment.refresh_from_db()
    assert attachment.lifecycle == Lifecycle.DISCARDED
    assert before <= attachment.expires_at <= timezone.now()
    assert attachment.discarded_at == attachment.expires_at


def test_discard_of_a_committed_attachment_is_409(alice, api):
    attachment = make_attachment(alice, created_at=timezone.now(), lifecycle=Lifecycle.COMMITTED, files=False)
    response = _discard(api(alice), attachment.pk)
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "ALREADY_COMMITTED"
    attachment.refresh_from_db()
    assert attachment.lifecycle == Lifecycle.COMMITTED and attachment.expires_at is None


@pytest.mark.parametrize("who", ["bob", "mallory", "unknown", "malformed"])
def test_discard_of_what_the_caller_does_not_own_is_404(alice, bob, mallory, api, who):
    attachment = make_attachment(alice, created_at=timezone.now(), files=False)
    caller = {"bob": bob, "mallory": mallory}.get(who, alice)
    target = {"unknown": uuid.uuid4(), "malformed": "nope"}.get(who, attachment.pk)
    response = _discard(api(caller), target)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "NOT_FOUND"
    attachment.refresh_from_db()
    assert attachment.lifecycle == Lifecycle.STAGED


def test_discarding_an_expired_upload_never_makes_it_due_later(alice):
    attachment = make_attachment(alice, created_at=T0, files=False)
    attachment_discard(user=alice, attachment_id=attachment.pk, now=T0 + 9 * DAY)
    attachment.refresh_from_db()
    assert attachment.lifecycle == Lifecycle.DISCARDED
    assert attachment.expires_at == T0 + 7 * DAY


def test_discard_is_reaped_on_the_next_tick(alice, settings):
    interval = timedelta(seconds=settings.AIRLOCK_SWEEP.interval_seconds)
    attachment = make_attachment(alice, created_at=T0)
    kept = make_attachment(alice, created_at=T0)
    assert sweep_if_due(now=T0 + DAY) is not None  # a tick just ran: the next is one interval away

    attachment_discard(user=alice, attachment_id=attachment.pk, now=T0 + DAY + timedelta(minutes=1))
    assert sweep_if_due(now=T0 + DAY + timedelta(minutes=2)) is None  # not due yet
    assert len(files_of(attachment)) == 3

    report = sweep_if_due(now=T0 + DAY + interval)
    assert report is not None and report.deleted == 1
    assert files_of(attachment) == set()
    attachment.refresh_from_db()
    assert attachment.lifecycle == Lifecycle.DELETED
    assert attachment.deleted_at == T0 + DAY + interval
    assert len(files_of(kept)) == 3


def test_discard_all_discards_only_the_callers_staged_uploads(alice, bob, api):
    now = timezone.now()
    mine = [make_attachment(alice, created_at=now, files=False) for _ in range(3)]
    committed = make_attachment(alice, created_at=now, lifecycle=Lifecycle.COMMITTED, files=False)
    already = make_attachment(alice, created_at=now, lifecycle=Lifecycle.DISCARDED, expires_at=now, files=False)
    bobs = make_attachment(bob, created_at=now, files=False)

    response = api(alice).post("/api/v1/attachments/discard-all", {}, format="json")

    assert response.status_code == 200
    assert response.json() == {"discarded": 3}
    assert set(Attachment.objects.filter(lifecycle=Lifecycle.DISCARDED).values_list("pk", flat=True)) == {
        a.pk for a in mine
    } | {already.pk}
    for attachment, lifecycle in ((committed, Lifecycle.COMMITTED), (bobs, Lifecycle.STAGED)):
        attachment.refresh_from_db()
        assert attachment.lifecycle == lifecycle


def test_discard_all_keeps_earlier_expiries(alice):
    expired = make_attachment(alice, created_at=T0, files=False)
    fresh = make_attachment(alice, created_at=T0 + 5 * DAY, files=False)
    assert attachments_discard_all(user=alice, now=T0 + 8 * DAY) == 2
    expired.refresh_from_db()
    fresh.refresh_from_db()
    assert expired.expires_at == T0 + 7 * DAY
    assert fresh.expires_at == T0 + 8 * DAY
    assert {expired.lifecycle, fresh.lifecycle} == {Lifecycle.DISCARDED}


def test_logging_out_discards_the_users_staged_uploads(alice, bob):
    now = timezone.now()
    staged = make_attachment(alice, created_at=now)
    committed = make_attachment(alice, created_at=now, lifecycle=Lifecycle.COMMITTED)
    bobs = make_attachment(bob, created_at=now)
    client = Client()
    client.force_login(alice)

    client.logout()

    staged.refresh_from_db()
    assert staged.lifecycle == Lifecycle.DISCARDED
    assert Attachment.objects.get(pk=committed.pk).lifecycle == Lifecycle.COMMITTED
    assert Attachment.objects.get(pk=bobs.pk).lifecycle == Lifecycle.STAGED

    report = sweep_expired(now=timezone.now() + timedelta(seconds=1))
    assert report.deleted == 1
    assert files_of(staged) == set()
    assert len(files_of(committed)) == 3 and len(files_of(bobs)) == 3
