"""Signed delivery links on the S3 backend: no header, a 302 to a short presigned GET, the gate still first."""

from __future__ import annotations

import hashlib
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.test import Client

from attachments.models import Attachment
from attachments.services.moderation import attachment_take_down
from tests.s3.support import ready_jpeg

pytestmark = [pytest.mark.s3, pytest.mark.django_db]


def _path(link: str) -> str:
    parts = urlsplit(link)
    return f"{parts.path}?{parts.query}"


def test_signed_links_redirect_to_a_presigned_get_without_any_header(s3, alice, api, events_token):
    row = Attachment.objects.get(pk=ready_jpeg(s3, api(alice), events_token))
    links = api(alice).get(f"/api/v1/attachments/{row.pk}").json()["links"]

    anonymous = Client()  # no Authorization, no cookie: an <img src> elsewhere
    download = anonymous.get(_path(links["download"]))
    assert download.status_code == 302
    assert download["Cache-Control"] == "private, no-store" and download["X-Content-Type-Options"] == "nosniff"
    location = download["Location"]
    assert location.startswith(f"{s3.endpoint}/{s3.bucket}/")
    assert int(parse_qs(urlsplit(location).query)["X-Amz-Expires"][0]) <= 60  # short, as today's download
    final = requests.get(location, timeout=30)
    assert final.status_code == 200 and hashlib.sha256(final.content).hexdigest() == row.sha256
    ranged = requests.get(location, headers={"Range": "bytes=0-9"}, timeout=30)
    assert ranged.status_code == 206 and ranged.content == final.content[:10]

    thumbnail = anonymous.get(_path(links["thumbnail"]))
    assert thumbnail.status_code == 302
    assert requests.get(thumbnail["Location"], timeout=30).content[:4] == b"RIFF"

    attachment_take_down(attachment_id=row.pk, actor="staff:mod", note="abuse")
    for name in ("download", "thumbnail"):
        gone = anonymous.get(_path(links[name]))
        assert gone.status_code == 404 and gone.json()["error"]["code"] == "NOT_FOUND"
