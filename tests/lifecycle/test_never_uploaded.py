"""A committed intent whose bytes never came ends as rejected/object_missing once its URL (plus grace) expired."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from attachments.models import Attachment
from attachments.storage import get_gateway
from sweeper.sweep import sweep_expired
from tests.support import create_intent

pytestmark = pytest.mark.django_db


def _intent(client, *, commit: bool = True) -> str:
    response = create_intent(client, profile="image", filename="cat.jpg", size=100, content_type="image/jpeg")
    assert response.status_code == 201, response.content
    attachment_id = response.json()["id"]
    if commit:
        assert (
            client.post(
                "/api/v1/attachments/commit", {"ids": [attachment_id], "ref": "post:1"}, format="json"
            ).status_code
            == 200
        )
    return attachment_id


def _after_url_and_grace(settings, seconds: int = 1):
    return timezone.now() + timedelta(
        seconds=settings.AIRLOCK_URL_SECONDS.upload + settings.AIRLOCK_LIFECYCLE_SECONDS.upload_grace + seconds
    )


def test_a_committed_intent_never_uploaded_ends_rejected_and_the_host_app_sees_it(alice, api, settings):
    client = api(alice)
    attachment_id = _intent(client)
    assert sweep_expired(now=_after_url_and_grace(settings, -60)).never_uploaded == 0  # still in grace
    assert client.get(f"/api/v1/attachments/{attachment_id}").json()["status"] == "pending"

    report = sweep_expired(now=_after_url_and_grace(settings))

    assert report.never_uploaded == 1
    body = client.get(f"/api/v1/attachments/{attachment_id}").json()
    assert body["status"] == "rejected"
    assert body["reason"]["code"] == "object_missing"
    row = Attachment.objects.get(pk=attachment_id)
    assert row.transitions.get(transition="reject").actor == "system:sweep"


def test_uncommitted_intents_and_objects_that_did_arrive_are_left_alone(alice, api, settings):
    client = api(alice)
    staged = _intent(client, commit=False)  # expires and is swept by the usual rule
    arrived = _intent(client)
    get_gateway().write_chunks(Attachment.objects.get(pk=arrived).storage_key, [b"late bytes"])  # event lost
    assert sweep_expired(now=_after_url_and_grace(settings)).never_uploaded == 0
    assert Attachment.objects.get(pk=staged).status == "pending"
    assert Attachment.objects.get(pk=arrived).status == "pending"  # reconcile's lost-arrival repair takes it


def test_a_dry_run_only_counts(alice, api, settings):
    attachment_id = _intent(api(alice))
    report = sweep_expired(now=_after_url_and_grace(settings), dry_run=True)
    assert report.never_uploaded == 1 and "would be ended as never uploaded" in report.summary()
    assert Attachment.objects.get(pk=attachment_id).status == "pending"
