"""Multipart uploads against a real S3 API (moto server): aborted when the intent dies, resumable by re-signing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from attachments.models import Attachment
from sweeper.control import sweeper_control_set
from sweeper.sweep import sweep_expired
from tests.s3.support import intent, mp4_bytes, send_parts
from tests.support import run_pipeline

pytestmark = [pytest.mark.s3, pytest.mark.django_db]

MIB = 1024 * 1024


def _in_progress(s3) -> set[str]:
    """Upload ids S3 still holds parts for."""
    listed = s3.client.list_multipart_uploads(Bucket=s3.bucket)
    return {u["UploadId"] for u in listed.get("Uploads", [])}


def _start(client, data: bytes, *, parts_sent: int) -> tuple[dict, Attachment]:
    created = intent(client, data, profile="media", filename="clip.mp4", content_type="video/mp4")
    upload = created["upload"]
    send_parts(upload, data, upload["parts"][:parts_sent])
    return created, Attachment.objects.get(pk=created["id"])


def test_discard_aborts_the_multipart_upload(multipart, alice, api, django_capture_on_commit_callbacks):
    client = api(alice)
    _created, row = _start(client, mp4_bytes(11 * MIB), parts_sent=1)
    assert row.multipart_upload_id in _in_progress(multipart)
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(f"/api/v1/attachments/{row.pk}/discard").status_code in (200, 204)
    assert row.multipart_upload_id not in _in_progress(multipart)


def test_discard_under_the_killswitch_leaves_the_abort_to_the_sweep(
    multipart, alice, api, django_capture_on_commit_callbacks
):
    client = api(alice)
    _created, row = _start(client, mp4_bytes(11 * MIB), parts_sent=1)
    sweeper_control_set(killswitch=True, actor="test")
    with django_capture_on_commit_callbacks(execute=True):
        client.post(f"/api/v1/attachments/{row.pk}/discard")
    assert row.multipart_upload_id in _in_progress(multipart)
    sweeper_control_set(killswitch=False, actor="test")
    assert sweep_expired().deleted == 1
    assert row.multipart_upload_id not in _in_progress(multipart)


def test_the_sweep_aborts_the_upload_of_an_expired_intent(multipart, alice, api):
    _created, row = _start(api(alice), mp4_bytes(11 * MIB), parts_sent=2)
    assert sweep_expired(now=timezone.now() + timedelta(days=8)).deleted == 1
    assert row.multipart_upload_id not in _in_progress(multipart)
    assert Attachment.objects.get(pk=row.pk).lifecycle == "deleted"


def test_a_committed_intent_never_finished_is_rejected_and_aborted(
    multipart, alice, api, settings, django_capture_on_commit_callbacks
):
    client = api(alice)
    _created, row = _start(client, mp4_bytes(11 * MIB), parts_sent=1)
    assert (
        client.post("/api/v1/attachments/commit", {"ids": [str(row.pk)], "ref": "post:1"}, format="json").status_code
        == 200
    )
    later = timezone.now() + timedelta(
        seconds=settings.AIRLOCK_URL_SECONDS.upload + settings.AIRLOCK_LIFECYCLE_SECONDS.upload_grace + 5
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert sweep_expired(now=later).never_uploaded == 1
    assert Attachment.objects.get(pk=row.pk).reason_code == "object_missing"
    assert row.multipart_upload_id not in _in_progress(multipart)


def test_resigned_parts_resume_an_upload_and_complete_it(multipart, alice, bob, api):
    data = mp4_bytes(11 * MIB)
    client = api(alice)
    created, row = _start(client, data, parts_sent=1)

    assert api(bob).post(f"/api/v1/uploads/{row.pk}/parts").status_code == 404  # owner only
    response = client.post(f"/api/v1/uploads/{row.pk}/parts")
    assert response.status_code == 200, response.content
    plan = response.json()
    assert [p["part_number"] for p in plan["parts"]] == [2, 3]  # part 1 is in storage already
    assert [p["part_number"] for p in plan["uploaded_parts"]] == [1] and plan["part_size"] == 5 * MIB
    etags = [{"part_number": 1, "etag": plan["uploaded_parts"][0]["etag"]}, *send_parts(plan, data)]
    assert client.post(plan["complete_url"], {"parts": etags}, format="json").status_code == 202
    assert multipart.get(row.storage_key) == data
    assert run_pipeline(row.pk) == "ready"
    # Assembled: nothing is in progress any more.
    again = client.post(f"/api/v1/uploads/{row.pk}/parts")
    assert again.status_code == 409 and again.json()["error"]["code"] == "UPLOAD_NOT_IN_PROGRESS"


def test_resign_refuses_an_intent_that_is_not_multipart(s3, alice, api):
    created = intent(api(alice), b"x" * 100, filename="a.jpg", content_type="image/jpeg")
    response = api(alice).post(f"/api/v1/uploads/{created['id']}/parts")
    assert response.status_code == 409 and response.json()["error"]["code"] == "UPLOAD_NOT_IN_PROGRESS"
