"""A declared sha256, end to end on the local backend: checked while the bytes stream, and again at intake.

The S3 side (x-amz-checksum-sha256 signed into the presigned upload, moto)
is tests/s3/test_integrity.py.
"""

from __future__ import annotations

import base64
import hashlib

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from attachments.models import Attachment, TenantUsage, Tombstone
from attachments.services.quotas import usage_recounted
from attachments.storage import get_gateway
from tests.support import jpeg_bytes, land_unchecked, pdf_bytes, put_bytes, run_pipeline

pytestmark = pytest.mark.django_db


def _intent(client, data: bytes, sha256: str | None, **kwargs):
    body = {"profile": "document", "filename": "a.pdf", "size": len(data), "content_type": "application/pdf", **kwargs}
    if sha256 is not None:
        body["sha256"] = sha256
    return client.post("/api/v1/uploads", body, format="json")


def _flipped(data: bytes) -> bytes:
    """One bit flipped in the middle: same size, another digest."""
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1 :]


@pytest.mark.parametrize("form", ["hex", "HEX", "base64"])
def test_a_declared_digest_in_either_form_is_checked_and_the_resource_shows_it(alice, api, form):
    client = api(alice)
    data = pdf_bytes()
    digest = hashlib.sha256(data)
    declared = {
        "hex": digest.hexdigest(),
        "HEX": digest.hexdigest().upper(),
        "base64": base64.b64encode(digest.digest()).decode(),
    }[form]
    created = _intent(client, data, declared)
    assert created.status_code == 201, created.content
    assert Attachment.objects.get(pk=created.json()["id"]).declared_sha256 == digest.hexdigest()
    assert put_bytes(created.json()["upload"]["url"], data, content_type="application/pdf").status_code == 202
    assert run_pipeline(created.json()["id"]) == "ready"
    resource = client.get(f"/api/v1/attachments/{created.json()['id']}").json()
    assert resource["sha256"] == digest.hexdigest()


def test_the_local_put_refuses_a_flipped_bit_keeps_nothing_and_the_url_stays_usable(alice, api):
    client = api(alice)
    data = pdf_bytes()
    created = _intent(client, data, hashlib.sha256(data).hexdigest())
    url = created.json()["upload"]["url"]
    refused = put_bytes(url, _flipped(data), content_type="application/pdf")
    assert refused.status_code == 400, refused.content
    error = refused.json()["error"]
    assert error["code"] == "CHECKSUM_MISMATCH" and "sha256" in error["details"]
    row = Attachment.objects.get(pk=created.json()["id"])
    assert get_gateway().head(row.storage_key) is None and row.uploaded_at is None
    assert put_bytes(url, data, content_type="application/pdf").status_code == 202
    assert run_pipeline(row.pk) == "ready"


def test_upload_through_refuses_a_mismatching_file_and_leaves_no_row(alice, api):
    client = api(alice)
    data = pdf_bytes()
    refused = client.post(
        "/api/v1/attachments",
        {
            "profile": "document",
            "sha256": hashlib.sha256(b"something else").hexdigest(),
            "file": SimpleUploadedFile("a.pdf", data, content_type="application/pdf"),
        },
        format="multipart",
    )
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "CHECKSUM_MISMATCH"
    assert not Attachment.objects.exists()
    assert TenantUsage.objects.get(tenant__slug="acme").bytes_used == 0
    # a hard delete like any other: through the one service, leaving a tombstone with its story
    stone = Tombstone.objects.get()
    assert (stone.status, stone.purged_by, stone.profile) == ("pending", "user:alice", "document")
    assert [(e["event"], e["actor"]) for e in stone.history] == [("intent", "user:alice")]

    accepted = client.post(
        "/api/v1/attachments",
        {
            "profile": "document",
            "sha256": hashlib.sha256(data).hexdigest(),
            "file": SimpleUploadedFile("a.pdf", data, content_type="application/pdf"),
        },
        format="multipart",
    )
    assert accepted.status_code == 202, accepted.content
    assert run_pipeline(accepted.json()["id"]) == "ready"
    assert (
        client.get(f"/api/v1/attachments/{accepted.json()['id']}").json()["sha256"] == hashlib.sha256(data).hexdigest()
    )


def test_intake_rejects_bytes_that_landed_with_another_digest(alice, api):
    """A store that does not check checksums (or a bit flipped after it did): intake compares."""
    client = api(alice)
    data = jpeg_bytes()
    created = _intent(
        client, data, hashlib.sha256(data).hexdigest(), profile="image", filename="a.jpg", content_type="image/jpeg"
    )
    row = Attachment.objects.get(pk=created.json()["id"])
    land_unchecked(row, _flipped(data))
    assert run_pipeline(row.pk) == "rejected"
    row.refresh_from_db()
    assert row.reason_code == "checksum_mismatch" and hashlib.sha256(data).hexdigest() in row.reason_message
    assert get_gateway().head(row.quarantine_key) is not None and get_gateway().head(row.storage_key) is None
    assert usage_recounted(row.tenant_id) == (0, 0)
    assert client.get(f"/api/v1/attachments/{row.pk}").json()["reason"]["code"] == "checksum_mismatch"


@pytest.mark.parametrize("value", ["abc", "z" * 64, "a" * 63, base64.b64encode(b"x" * 31).decode(), 12])
def test_a_malformed_digest_is_a_validation_error_and_creates_nothing(alice, api, value):
    response = _intent(api(alice), b"x" * 10, value)  # type: ignore[arg-type]
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "VALIDATION_ERROR" and "sha256" in response.json()["error"]["details"]
    assert not Attachment.objects.exists()


def test_without_a_digest_nothing_changes(alice, api):
    client = api(alice)
    data = pdf_bytes()
    created = _intent(client, data, None)
    assert created.status_code == 201
    upload = created.json()["upload"]
    assert put_bytes(upload["url"], data, content_type="application/pdf").status_code == 202
    assert Attachment.objects.get(pk=created.json()["id"]).declared_sha256 == ""
    assert run_pipeline(created.json()["id"]) == "ready"
