"""On S3 a download is a 302 to a presigned GET: the gate comes before it, so a file being checked gets none.

The bytes are in the bucket from the moment the client sent them; the owner of
a pending or processing file must still get 409 NOT_READY, not a redirect that
would hand them out unscanned.
"""

from __future__ import annotations

import hashlib

import pytest
import requests

from attachments import signing
from attachments.models import Attachment
from tests.s3.support import event_for, intent, post_events, send_upload
from tests.support import jpeg_bytes, run_pipeline

pytestmark = [pytest.mark.s3, pytest.mark.django_db]

RENDITIONS = ["download", "thumbnail", "variants/small"]


def _signed(row: Attachment, rendition: str) -> str:
    query = signing.delivery_query(
        tenant_id=row.tenant_id,
        attachment_id=row.pk,
        name=rendition.replace("variants/", "variant-"),
        exp=signing.delivery_expiry(),
    )
    return f"/api/v1/attachments/{row.pk}/{rendition}?{query}"


def test_the_bytes_in_the_bucket_are_not_handed_out_before_they_are_checked(s3, alice, api, events_token):
    client = api(alice)
    data = jpeg_bytes((800, 600))
    created = intent(client, data, filename="cat.jpg", content_type="image/jpeg")
    assert send_upload(created["upload"], data).status_code in (200, 201, 204)
    row = Attachment.objects.get(pk=created["id"])
    assert post_events(event_for(s3, row.storage_key), token=events_token).status_code == 202
    assert s3.get(row.storage_key) == data  # the unscanned bytes are there

    for status in ("pending", "processing"):
        Attachment.objects.filter(pk=row.pk).update(status=status)
        for rendition in RENDITIONS:
            for path in (f"/api/v1/attachments/{row.pk}/{rendition}", _signed(row, rendition)):
                for headers in ({}, {"HTTP_RANGE": "bytes=0-9"}):
                    response = client.get(path, HTTP_ACCEPT="image/webp,*/*", **headers)
                    assert response.status_code == 409, (status, path, response.status_code)
                    assert "Location" not in response
                    assert response.json()["error"] == {
                        "code": "NOT_READY",
                        "message": response.json()["error"]["message"],
                        "details": {"status": status},
                    }
        resource = client.get(f"/api/v1/attachments/{row.pk}").json()
        assert (resource["status"], resource["available"], set(resource["links"])) == (status, False, {"self"})

    Attachment.objects.filter(pk=row.pk).update(status="pending")
    assert run_pipeline(row.pk) == "ready"
    row.refresh_from_db()
    download = client.get(f"/api/v1/attachments/{row.pk}/download")
    assert download.status_code == 302  # once ready, the presigned GET, of the checked copy
    served = requests.get(download["Location"], timeout=30)
    assert served.status_code == 200 and hashlib.sha256(served.content).hexdigest() == row.sha256
    assert client.get(f"/api/v1/attachments/{row.pk}").json()["available"] is True

    Attachment.objects.filter(pk=row.pk).update(status="rejected", reason_code="malware")
    for rendition in RENDITIONS:
        gone = client.get(f"/api/v1/attachments/{row.pk}/{rendition}", HTTP_ACCEPT="image/webp,*/*")
        assert (gone.status_code, "Location" in gone) == (404, False)
