"""The console's player on S3 storage: the staff media endpoint hands the player a presigned GET that seeks."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.test import Client

from attachments.models import Attachment
from tests.corpus import corpus_dir
from tests.s3.support import event_for, intent, post_events, send_upload
from tests.support import run_pipeline

pytestmark = [pytest.mark.s3, pytest.mark.django_db]


@pytest.fixture
def platform_moderator(make_user):
    from attachments.services.staff import moderator_group_ensure, platform_staff_group_ensure

    user = make_user("mod", tenant="staff", staff=True)
    user.groups.add(moderator_group_ensure(), platform_staff_group_ensure())
    return user


def test_staff_media_redirects_to_a_presigned_get_answering_ranges(s3, alice, api, events_token, platform_moderator):
    data = (corpus_dir() / "generated" / "video_h264_aac.mp4").read_bytes()
    created = intent(api(alice), data, profile="media", filename="clip.mp4", content_type="video/mp4")
    assert send_upload(created["upload"], data, filename="clip.mp4").status_code in (200, 201, 204)
    key = Attachment.objects.get(pk=created["id"]).storage_key
    assert post_events(event_for(s3, key), token=events_token).status_code == 202
    assert run_pipeline(created["id"]) == "ready"

    staff = Client()
    staff.force_login(platform_moderator)
    response = staff.get(f"/admin/attachments/attachment/{created['id']}/media/")
    assert response.status_code == 302
    assert response["X-Content-Type-Options"] == "nosniff"
    location = response["Location"]
    assert location.startswith(f"{s3.endpoint}/{s3.bucket}/")
    query = parse_qs(urlsplit(location).query)
    assert query["response-content-type"] == ["video/mp4"]
    assert query["response-content-disposition"][0].startswith("inline;")
    # The player gets what download serves: the location-free stream copy, not the upload.
    row = Attachment.objects.get(pk=created["id"])
    assert row.served_key != row.storage_key
    assert urlsplit(location).path.endswith("/" + row.served_key)
    whole = requests.get(location, timeout=30).content
    part = requests.get(location, headers={"Range": "bytes=100-199"}, timeout=30)
    assert part.status_code == 206 and part.content == whole[100:200] and len(whole) == row.size

    poster = staff.get(f"/admin/attachments/attachment/{created['id']}/poster/")
    assert poster.status_code == 302
    assert requests.get(poster["Location"], timeout=30).content[8:12] == b"WEBP"
