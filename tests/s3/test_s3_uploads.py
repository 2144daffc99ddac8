"""Direct uploads to S3 from a plain HTTP client, through events to ready, and the gated read."""

from __future__ import annotations

import base64
import hashlib
import json
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from attachments.models import Attachment, OutboxMessage, StorageEvent
from tests.s3.support import consume, event_for, intent, mp4_bytes, post_events, ready_jpeg, send_parts, send_upload
from tests.support import jpeg_bytes, run_pipeline

pytestmark = [pytest.mark.s3, pytest.mark.django_db]

MIB = 1024 * 1024


def test_presigned_post_upload_then_sqs_event_makes_it_ready(s3, alice, api):
    queue_url = s3.notify_queue()
    data = jpeg_bytes((320, 240))
    created = intent(api(alice), data, filename="cat.jpg", content_type="image/jpeg")
    upload = created["upload"]
    assert upload["method"] == "POST" and upload["headers"] == {}
    assert upload["url"].startswith(s3.endpoint) and "key" in upload["fields"]

    response = send_upload(upload, data, filename="cat.jpg")
    assert response.status_code in (200, 201, 204), response.text
    row = Attachment.objects.get(pk=created["id"])
    assert s3.get(row.storage_key) == data and row.uploaded_at is None

    report = consume(s3, queue_url)
    assert "test_event=1" in report and "started=1" in report
    assert s3.queue_depth(queue_url) == 0
    event = StorageEvent.objects.get(key=row.storage_key)
    assert (event.source, event.event_name, event.outcome, event.size) == (
        "sqs",
        "ObjectCreated:Post",
        "started",
        len(data),
    )
    assert run_pipeline(created["id"]) == "ready"
    row.refresh_from_db()
    assert row.content_type == "image/jpeg" and row.stored_size == len(data)


def test_presigned_put_upload_then_webhook_event_makes_it_ready(s3, alice, api, settings, events_token):
    settings.AIRLOCK_S3_UPLOAD_METHOD = "PUT"
    from attachments.storage import reset_gateway

    reset_gateway()
    data = jpeg_bytes((64, 64))
    created = intent(api(alice), data, filename="put.jpg", content_type="image/jpeg")
    upload = created["upload"]
    assert upload["method"] == "PUT" and upload["fields"] == {}
    assert upload["headers"] == {"Content-Type": "image/jpeg", "If-None-Match": "*"}
    signed = parse_qs(urlsplit(upload["url"]).query)["X-Amz-SignedHeaders"][0].split(";")
    assert {"content-type", "if-none-match", "host"} <= set(signed)
    assert "X-Amz-Credential" in upload["url"] and "AWS4-HMAC-SHA256" in upload["url"]  # s3v4

    assert send_upload(upload, data).status_code == 200
    # The URL is single-use: S3 refuses to overwrite what is there.
    assert send_upload(upload, b"\x89PNG overwrite").status_code == 412
    key = Attachment.objects.get(pk=created["id"]).storage_key
    assert s3.get(key) == data

    response = post_events(event_for(s3, key, minio=True), token=events_token)
    assert response.status_code == 202 and response.json()["accepted"] == 1
    assert run_pipeline(created["id"]) == "ready"


def test_post_policy_bounds_the_size_and_pins_key_and_type(s3, alice, api, settings):
    profile_max = settings.AIRLOCK_PROFILES["image"]["max_bytes"]
    created = intent(api(alice), b"x" * 5000, filename="cat.jpg", content_type="image/jpeg")
    fields = created["upload"]["fields"]
    key = Attachment.objects.get(pk=created["id"]).storage_key
    assert fields["key"] == key and fields["Content-Type"] == "image/jpeg"
    assert fields["x-amz-algorithm"] == "AWS4-HMAC-SHA256" and fields["x-amz-signature"]

    policy = json.loads(base64.b64decode(fields["policy"]))
    conditions = policy["conditions"]
    ranges = [c for c in conditions if isinstance(c, list) and c[0] == "content-length-range"]
    assert ranges == [["content-length-range", 0, 5000]] and 5000 <= profile_max
    assert {"key": key} in conditions
    assert {"bucket": s3.bucket} in conditions
    assert {"Content-Type": "image/jpeg"} in conditions
    assert policy["expiration"]


def test_post_policy_upper_bound_is_never_above_the_profile_limit(s3, alice, api, settings):
    profile_max = settings.AIRLOCK_PROFILES["image"]["max_bytes"]
    created = (
        api(alice)
        .post(
            "/api/v1/uploads",
            {"profile": "image", "filename": "big.jpg", "size": profile_max, "content_type": "image/jpeg"},
            format="json",
        )
        .json()
    )
    conditions = json.loads(base64.b64decode(created["upload"]["fields"]["policy"]))["conditions"]
    assert ["content-length-range", 0, profile_max] in conditions


def test_download_redirects_to_a_presigned_get_that_fixes_type_and_disposition(s3, alice, api, events_token):
    row = Attachment.objects.get(
        pk=ready_jpeg(s3, api(alice), events_token, size=(200, 100), filename="Ünïcode cat.jpg")
    )

    response = api(alice).get(f"/api/v1/attachments/{row.pk}/download")
    assert response.status_code == 302
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Security-Policy"] == "default-src 'none'; sandbox"
    location = response["Location"]
    assert location.startswith(f"{s3.endpoint}/{s3.bucket}/")
    query = parse_qs(urlsplit(location).query)
    assert query["response-content-type"] == ["image/jpeg"]
    disposition = query["response-content-disposition"][0]
    assert disposition.startswith("attachment;")
    assert "filename*=UTF-8''%C3%9Cn%C3%AFcode%20cat.jpg" in disposition
    assert int(query["X-Amz-Expires"][0]) <= 60

    final = requests.get(location, timeout=30)
    assert final.status_code == 200
    assert final.headers["Content-Type"] == "image/jpeg"
    assert final.headers["Content-Disposition"] == disposition
    assert hashlib.sha256(final.content).hexdigest() == row.sha256 and len(final.content) == row.size


def test_multipart_upload_over_the_threshold(s3, alice, api, settings, events_token):
    from attachments.storage import reset_gateway

    settings.AIRLOCK_S3_MULTIPART = settings.AIRLOCK_S3_MULTIPART.replace(threshold_bytes=5 * MIB, part_bytes=5 * MIB)
    reset_gateway()
    data = mp4_bytes(11 * MIB)
    created = intent(api(alice), data, profile="media", filename="clip.mp4", content_type="video/mp4")
    upload = created["upload"]
    assert upload["method"] == "PUT" and upload["part_size"] == 5 * MIB
    assert [p["part_number"] for p in upload["parts"]] == [1, 2, 3]
    assert upload["url"] == upload["parts"][0]["url"]
    assert upload["complete_url"].endswith(f"/api/v1/uploads/{created['id']}/complete")
    assert "uploadId" not in json.dumps({k: v for k, v in upload.items() if k not in ("url", "parts")})
    row = Attachment.objects.get(pk=created["id"])
    assert row.multipart_upload_id
    signed = parse_qs(urlsplit(upload["parts"][0]["url"]).query)["X-Amz-SignedHeaders"][0].split(";")
    assert "content-length" in signed  # each part's size is fixed by its signature

    etags = send_parts(upload, data, headers=upload["headers"])
    assert not s3.exists(row.storage_key)  # nothing until the parts are assembled

    client = api(alice)
    wrong = [dict(p, etag='"0000"') if p["part_number"] == 2 else p for p in etags]
    response = client.post(upload["complete_url"], {"parts": wrong}, format="json")
    assert response.status_code == 400 and response.json()["error"]["code"] == "VALIDATION_ERROR"
    assert Attachment.objects.get(pk=row.pk).multipart_upload_id == row.multipart_upload_id  # nothing lost
    # A part left out (its PUT still in flight, or failed): S3 would assemble a short object for good.
    response = client.post(upload["complete_url"], {"parts": etags[:2]}, format="json")
    assert response.status_code == 400 and response.json()["error"]["details"]["parts"] == ["missing [3]"]
    assert Attachment.objects.get(pk=row.pk).multipart_upload_id == row.multipart_upload_id

    response = client.post(upload["complete_url"], {"parts": list(reversed(etags))}, format="json")
    assert response.status_code == 202 and response.json()["status"] == "pending"
    row.refresh_from_db()
    assert row.multipart_upload_id is None and row.uploaded_at is not None
    assert s3.get(row.storage_key) == data
    # Completing again, or the S3 event arriving too, is harmless.
    assert client.post(upload["complete_url"], {"parts": etags}, format="json").status_code == 202
    assert (
        post_events(
            event_for(s3, row.storage_key, name="ObjectCreated:CompleteMultipartUpload"), token=events_token
        ).status_code
        == 202
    )

    assert run_pipeline(row.pk) == "ready"
    row.refresh_from_db()
    assert row.content_type == "video/mp4" and row.size == len(data) == row.stored_size
    assert row.sha256 == hashlib.sha256(data).hexdigest()
    assert any(str(row.pk) in m.args for m in OutboxMessage.objects.filter(actor_name="intake"))


@pytest.mark.parametrize(
    "body",
    [
        {"parts": []},
        {"parts": [{"part_number": 0, "etag": "x"}]},
        {"parts": [{"part_number": "1", "etag": "x"}]},
        {"parts": [{"part_number": 1}]},
        {"parts": [{"part_number": 1, "etag": "a"}, {"part_number": 1, "etag": "b"}]},
        {"parts": "all of them"},
    ],
)
def test_complete_refuses_a_malformed_part_list(s3, alice, api, body):
    created = intent(api(alice), b"x" * 100, filename="a.jpg", content_type="image/jpeg")
    response = api(alice).post(f"/api/v1/uploads/{created['id']}/complete", body, format="json")
    assert response.status_code == 400 and response.json()["error"]["code"] == "VALIDATION_ERROR"


def test_complete_without_parts_is_still_the_plain_hint(s3, alice, api):
    data = jpeg_bytes()
    created = intent(api(alice), data, filename="a.jpg", content_type="image/jpeg")
    client = api(alice)
    assert client.post(f"/api/v1/uploads/{created['id']}/complete").json()["status"] == "pending"
    assert not StorageEvent.objects.exists()  # nothing in storage yet: nothing recorded
    assert send_upload(created["upload"], data).status_code in (200, 201, 204)
    assert client.post(f"/api/v1/uploads/{created['id']}/complete").status_code == 202
    assert StorageEvent.objects.get().outcome == "started"
    assert run_pipeline(created["id"]) == "ready"


def test_small_uploads_are_not_multipart(s3, alice, api, settings):
    settings.AIRLOCK_S3_MULTIPART = settings.AIRLOCK_S3_MULTIPART.replace(threshold_bytes=5 * MIB)
    from attachments.storage import reset_gateway

    reset_gateway()
    created = intent(api(alice), b"x" * (5 * MIB), profile="media", filename="a.mp4", content_type="video/mp4")
    assert created["upload"]["method"] == "POST" and "parts" not in created["upload"]
    assert Attachment.objects.get(pk=created["id"]).multipart_upload_id is None


def test_replayed_presigned_post_never_reaches_what_is_served(s3, alice, bob, api):
    """S3 has no conditional POST: a replay after scanning must not swap the served bytes."""
    from attachments.storage import get_gateway
    from attachments.uploads.services.uploads import object_arrived

    client = api(alice)
    data = mp4_bytes(4096)
    created = intent(client, data, profile="media", filename="clip.mp4", content_type="video/mp4")
    upload = created["upload"]
    assert upload["method"] == "POST"
    assert send_upload(upload, data).status_code in (200, 201, 204)
    row = Attachment.objects.get(pk=created["id"])
    object_arrived(
        key=row.storage_key, size=len(data), source="webhook", dedupe_key="first", event_name="ObjectCreated:Post"
    )
    assert run_pipeline(created["id"]) == "ready"
    row.refresh_from_db()
    # The bytes now live at a key only the server writes; the upload key is empty.
    assert row.content_key.startswith(f"tenants/acme/derivatives/{row.pk}/") and not s3.exists(row.storage_key)
    assert row.sha256 == hashlib.sha256(data).hexdigest()

    evil = mp4_bytes(4096, seed=99)
    assert send_upload(upload, evil).status_code in (200, 201, 204)  # the replay lands in S3...
    with_capture = object_arrived(
        key=row.storage_key, size=len(evil), source="webhook", dedupe_key="replay", event_name="ObjectCreated:Post"
    )
    assert with_capture.outcome == "replay_deleted"
    from attachments.uploads.services.uploads import _delete_unauthorized

    _delete_unauthorized(row.storage_key)  # what the on-commit hook does
    assert not s3.exists(row.storage_key)
    # ...but what is served is still the scanned snapshot.
    response = api(bob).get(f"/api/v1/attachments/{row.pk}/download")
    assert response.status_code == 302
    served = requests.get(response["Location"], timeout=30)
    assert served.content == data
    assert get_gateway().head(row.content_key).size == len(data)


def test_snapshot_is_kept_by_reconcile_and_reaped_by_the_sweeper(s3, alice, api, settings):
    from datetime import timedelta

    from django.utils import timezone

    from attachments.services.lifecycle import attachment_discard
    from attachments.uploads.services.uploads import object_arrived
    from sweeper.reconcile import reconcile_storage
    from sweeper.sweep import sweep_expired

    settings.AIRLOCK_SWEEPER_KILLSWITCH = None
    settings.AIRLOCK_SWEEPER_DRY_RUN = None
    data = mp4_bytes(2048)
    created = intent(api(alice), data, profile="media", filename="clip.mp4", content_type="video/mp4")
    assert send_upload(created["upload"], data).status_code in (200, 201, 204)
    row = Attachment.objects.get(pk=created["id"])
    object_arrived(
        key=row.storage_key, size=len(data), source="webhook", dedupe_key="k", event_name="ObjectCreated:Post"
    )
    assert run_pipeline(created["id"]) == "ready"
    row.refresh_from_db()
    later = timezone.now() + timedelta(days=1)
    report = reconcile_storage(now=later)
    assert not [f for f in report.findings if f.key == row.content_key], report.findings
    assert s3.exists(row.content_key)
    attachment_discard(user=alice, attachment_id=row.pk)
    sweep_expired(now=timezone.now() + timedelta(seconds=1))
    assert not s3.exists(row.content_key)
    assert Attachment.objects.get(pk=row.pk).lifecycle == "deleted"


def test_upload_without_any_event_is_picked_up_by_the_tick(s3, alice, api):
    """No notifications configured and no complete call: the scheduler tick finds the bytes."""
    from processing.recovery import pick_up_silent_uploads

    data = jpeg_bytes((50, 40))
    created = intent(api(alice), data, filename="quiet.jpg", content_type="image/jpeg")
    assert pick_up_silent_uploads() == 0  # nothing there yet
    assert send_upload(created["upload"], data).status_code in (200, 201, 204)
    assert pick_up_silent_uploads() == 1
    assert pick_up_silent_uploads() == 0  # recorded once
    assert run_pipeline(created["id"]) == "ready"
