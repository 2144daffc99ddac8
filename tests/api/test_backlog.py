"""Load shedding: a tenant's new uploads get 503 + Retry-After while its own backlog is too old."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from attachments.models import Attachment, Status
from attachments.services import backlog
from tests.support import create_intent, jpeg_bytes

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_backlog_reading(settings):
    settings.AIRLOCK_MAX_BACKLOG_SECONDS = 60
    backlog.forget()
    yield
    backlog.forget()


def _late_files(client, n: int, *, seconds: float, **fields) -> None:
    # All intents first: aged one by one, the fifth would shed the sixth's intent.
    pks = [create_intent(client).json()["id"] for _ in range(n)]
    Attachment.objects.filter(pk__in=pks).update(uploaded_at=timezone.now() - timedelta(seconds=seconds), **fields)
    backlog.forget()


def test_intents_and_upload_throughs_are_shed_while_the_backlog_is_too_old(alice, api):
    client = api(alice)
    _late_files(client, backlog.QUEUE_DEPTH, seconds=90, status=Status.PROCESSING)
    refused = create_intent(client)
    assert refused.status_code == 503, refused.content
    body = refused.json()["error"]
    assert body["code"] == "UNAVAILABLE" and body["details"]["max_backlog_seconds"] == 60
    assert 2 <= int(refused["Retry-After"]) <= 30
    through = client.post("/api/v1/attachments", {"profile": "image", "file": _file()}, format="multipart")
    assert through.status_code == 503 and through["Retry-After"]


def test_one_tenant_flooding_pauses_only_its_own_uploads(alice, bob, mallory, api):
    """Mallory's files wait (parked behind her tenant's cap, say); alice's tenant keeps uploading."""
    flooder = api(mallory)
    _late_files(flooder, backlog.QUEUE_DEPTH * 3, seconds=600, status=Status.PROCESSING)
    refused = create_intent(flooder)
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "UNAVAILABLE"
    assert 2 <= int(refused["Retry-After"]) <= 30
    through = flooder.post("/api/v1/attachments", {"profile": "image", "file": _file()}, format="multipart")
    assert through.status_code == 503 and through["Retry-After"]
    for user in (alice, bob):  # another tenant, both its users, every way in
        client = api(user)
        assert create_intent(client).status_code == 201
        through = client.post("/api/v1/attachments", {"profile": "image", "file": _file()}, format="multipart")
        assert through.status_code == 202, through.content
    assert create_intent(flooder).status_code == 503  # still behind: still refused


def test_a_tenant_is_shed_on_its_own_backlog_however_many_others_wait(alice, mallory, api):
    # Four late files each: neither tenant has five, so neither is paused (globally there are eight).
    _late_files(api(mallory), backlog.QUEUE_DEPTH - 1, seconds=900)
    _late_files(api(alice), backlog.QUEUE_DEPTH - 1, seconds=900)
    assert create_intent(api(alice)).status_code == 201
    assert create_intent(api(mallory)).status_code == 201


def test_one_stuck_file_or_files_in_retry_backoff_pause_nothing(alice, api):
    client = api(alice)
    _late_files(client, backlog.QUEUE_DEPTH - 1, seconds=900)  # a few lost jobs, waiting for the reconciler
    _late_files(client, 3, seconds=900, attempts=2)  # backing off on purpose
    assert create_intent(client).status_code == 201


def test_files_waiting_out_a_dependency_outage_are_not_backlog(alice, api):
    """Handed back because the scanner was down, a moment ago: they wait for the scanner, not for the tenant's turn."""
    client = api(alice)
    handed_back = timezone.now() - timedelta(seconds=3)
    _late_files(client, backlog.QUEUE_DEPTH * 2, seconds=900, dependency_wait_at=handed_back)
    assert backlog.backlog_seconds(_tenant(alice)) == 0
    assert create_intent(client).status_code == 201
    assert backlog.paused_tenants() == []
    # The same files, none handed back: they are a backlog of 900 s.
    Attachment.objects.filter(tenant_id=_tenant(alice)).update(dependency_wait_at=None)
    backlog.forget()
    assert backlog.backlog_seconds(_tenant(alice)) > 890
    assert create_intent(client).status_code == 503
    assert [row["tenant_id"] for row in backlog.paused_tenants()] == [_tenant(alice)]


def test_after_an_outage_the_clock_runs_from_the_hand_back_not_the_upload(alice, api):
    client = api(alice)
    # Uploaded 15 minutes ago, last handed back for the scanner 50 s ago (it came back since): 50 s < 60 s.
    handed_back = timezone.now() - timedelta(seconds=50)
    _late_files(client, backlog.QUEUE_DEPTH, seconds=900, status=Status.PROCESSING, dependency_wait_at=handed_back)
    assert 45 < backlog.backlog_seconds(_tenant(alice)) < 60
    assert create_intent(client).status_code == 201
    # Still not done 70 s after their hand-back: that is a backlog again.
    Attachment.objects.filter(tenant_id=_tenant(alice), dependency_wait_at__isnull=False).update(
        dependency_wait_at=timezone.now() - timedelta(seconds=70)
    )
    backlog.forget()
    assert create_intent(client).status_code == 503


def test_zero_turns_shedding_off(alice, api, settings):
    client = api(alice)
    _late_files(client, backlog.QUEUE_DEPTH, seconds=900)
    settings.AIRLOCK_MAX_BACKLOG_SECONDS = 0
    assert create_intent(client).status_code == 201


def _tenant(user) -> int:
    return user.membership.tenant_id


def _file():
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile("a.jpg", jpeg_bytes(), content_type="image/jpeg")
