"""A ref's archive on the S3 backend: every member streamed from the bucket in chunks, equal to what download serves."""

from __future__ import annotations

import pytest
from django.test import Client

from attachments.models import Attachment
from processing import transcode
from tests.corpus import corpus_dir
from tests.refs.archive_support import assert_archive_is_what_download_serves, assert_web_archive, body, commit
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


def _ready_upload(s3, client, events_token, data: bytes, **kwargs) -> str:
    created = intent(client, data, **kwargs)
    assert send_upload(created["upload"], data, filename=kwargs["filename"]).status_code in (200, 201, 204)
    key = Attachment.objects.get(pk=created["id"]).storage_key
    assert post_events(event_for(s3, key), token=events_token).status_code == 202
    assert run_pipeline(created["id"]) == "ready"
    return created["id"]


def test_with_renditions_web_a_video_goes_in_as_its_web_rendition_from_the_bucket(
    s3, alice, api, events_token, django_capture_on_commit_callbacks
):
    client = api(alice)
    clip = (corpus_dir() / "generated" / "video_hevc_location_rotated.mov").read_bytes()
    video = _ready_upload(
        s3, client, events_token, clip, profile="media", filename="IMG_0001.MOV", content_type="video/quicktime"
    )
    photo = _ready_upload(
        s3, client, events_token, jpeg_bytes((64, 48)), filename="photo.jpg", content_type="image/jpeg"
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert transcode.transcode_one(video) == "ready"
    commit(client, [video, photo], "party")
    assert_web_archive(client, "party", video=video, photo=photo, video_name="IMG_0001.MOV")
