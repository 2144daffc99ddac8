"""A ref's archive on the S3 backend: every member streamed from the bucket in chunks, equal to what download serves."""

from __future__ import annotations

import pytest
from django.test import Client

from attachments.models import Attachment
from tests.refs.archive_support import assert_archive_is_what_download_serves, body, commit
from tests.s3.support import event_for, intent, post_events, send_upload
from tests.support import jpeg_bytes, run_pipeline

pytestmark = [pytest.mark.s3, pytest.mark.django_db]


def _ready_in_bucket(s3, client, events_token, n: int) -> list[str]:
    ids = []
    for i in range(n):
        data = jpeg_bytes((64 + i % 5, 48), color=(i * 5 % 256, 90, 30))
        created = intent(client, data, filename="IMG.jpg" if i % 3 == 0 else f"p{i}.jpg", content_type="image/jpeg")
        assert send_upload(created["upload"], data).status_code in (200, 201, 204)
        key = Attachment.objects.get(pk=created["id"]).storage_key
        assert post_events(event_for(s3, key), token=events_token).status_code == 202
        assert run_pipeline(created["id"]) == "ready"
        ids.append(created["id"])
    return ids


def test_a_zip_of_50_files_from_the_bucket_opens_and_matches_the_served_bytes(s3, alice, bob, api, events_token):
    client = api(alice)
    ids = _ready_in_bucket(s3, client, events_token, 50)
    commit(client, ids, "party")
    response = api(bob).get("/api/v1/refs/party/archive")
    assert response.status_code == 200 and response.streaming  # streamed through us, not a redirect
    zipped = body(response)
    assert int(response["Content-Length"]) == len(zipped)
    names = assert_archive_is_what_download_serves(api(bob), "party", ids, zipped)
    assert names[0] == "IMG.jpg" and names[3] == "IMG (2).jpg"
    link = client.get("/api/v1/refs/party/archive-link").json()["url"]
    signed = Client().get(link.split("testserver", 1)[-1])
    assert signed.status_code == 200
    assert_archive_is_what_download_serves(client, "party", ids, body(signed))
