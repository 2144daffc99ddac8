"""In S3 mode, a phone's video is served as its metadata-free copy, and the presigned GET seeks."""

from __future__ import annotations

import hashlib

import pytest
import requests

from attachments.models import Attachment
from tests.corpus import corpus_dir
from tests.pipeline.test_media_served import LOCATION_BYTES, boxes
from tests.s3.support import event_for, intent, post_events, send_upload
from tests.support import run_pipeline

pytestmark = [pytest.mark.s3, pytest.mark.django_db]

NAME = "video_hevc_location_rotated.mov"


def test_served_video_is_the_remuxed_copy_and_its_presigned_get_answers_range(s3, alice, api, events_token):
    original = (corpus_dir() / "generated" / NAME).read_bytes()
    client = api(alice)
    created = intent(client, original, profile="media", filename=NAME, content_type="video/quicktime")
    assert send_upload(created["upload"], original, filename=NAME).status_code in (200, 201, 204)
    row = Attachment.objects.get(pk=created["id"])
    assert post_events(event_for(s3, row.storage_key), token=events_token).status_code == 202
    assert run_pipeline(created["id"]) == "ready"
    row.refresh_from_db()
    # Stored as a derivative in the bucket, beside the snapshot of the original.
    assert row.served_key != row.working_key and s3.get(row.working_key) == original

    response = client.get(f"/api/v1/attachments/{row.pk}/download")
    assert response.status_code == 302
    location = response["Location"]
    served = requests.get(location, timeout=30)
    assert served.status_code == 200 and served.headers["Content-Type"] == "video/quicktime"
    body = served.content
    assert hashlib.sha256(body).hexdigest() == row.sha256 and len(body) == row.size
    for needle in LOCATION_BYTES:
        assert needle not in body, needle
    top = [path[0] for path, _, _ in boxes(body) if len(path) == 1]
    assert top.index(b"moov") < top.index(b"mdat")

    partial = requests.get(location, headers={"Range": "bytes=0-99"}, timeout=30)
    assert partial.status_code == 206
    assert partial.headers["Content-Range"] == f"bytes 0-99/{len(body)}"
    assert partial.content == body[:100]
    tail = requests.get(location, headers={"Range": f"bytes={len(body) - 64}-"}, timeout=30)
    assert tail.status_code == 206 and tail.content == body[-64:]
