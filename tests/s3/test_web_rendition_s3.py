"""In S3 mode, a video's original leaves the bucket once its copy is durable, and its web rendition is stored there."""

from __future__ import annotations

import hashlib

import pytest
import requests

from attachments.models import Attachment, TransitionLog
from attachments.services.audit import ORIGINAL_REMOVED
from attachments.services.quotas import tenant_usage
from processing import transcode
from tests.corpus import corpus_dir
from tests.s3.support import event_for, intent, post_events, send_upload
from tests.support import run_pipeline

pytestmark = [pytest.mark.s3, pytest.mark.django_db]

NAME = "video_hevc_location_rotated.mov"


def test_one_stored_copy_and_a_web_rendition_in_the_bucket(
    s3, alice, api, events_token, django_capture_on_commit_callbacks
):
    original = (corpus_dir() / "generated" / NAME).read_bytes()
    client = api(alice)
    created = intent(client, original, profile="media", filename=NAME, content_type="video/quicktime")
    assert send_upload(created["upload"], original, filename=NAME).status_code in (200, 201, 204)
    row = Attachment.objects.get(pk=created["id"])
    assert post_events(event_for(s3, row.storage_key), token=events_token).status_code == 202
    assert run_pipeline(created["id"]) == "ready"
    row.refresh_from_db()
    snapshot = row.working_key
    assert s3.get(snapshot) == original

    with django_capture_on_commit_callbacks(execute=True):
        assert transcode.transcode_one(row.pk) == "ready"

    row.refresh_from_db()
    assert not s3.exists(snapshot) and not s3.exists(row.storage_key)  # the original is gone, both keys
    assert row.working_key == row.served_key and row.stored_size == row.size
    assert tenant_usage(tenant=row.tenant).bytes_used == row.size
    audit = TransitionLog.objects.get(attachment=row, transition=ORIGINAL_REMOVED)
    assert audit.details["sha256"] == hashlib.sha256(original).hexdigest()

    shown = client.get(f"/api/v1/attachments/{row.pk}").json()
    assert shown["renditions"]["web"]["status"] == "ready"
    response = client.get(shown["links"]["web"])
    assert response.status_code == 302  # presigned, straight from the bucket
    web = requests.get(response["Location"], timeout=30)
    assert web.status_code == 200 and web.headers["Content-Type"] == "video/mp4"
    assert len(web.content) == shown["renditions"]["web"]["bytes"]
    assert web.content[4:8] == b"ftyp" and b"ISO6709" not in web.content
