"""Integrity end to end on S3 (moto's server): the stored size and digest against the intent's declaration.

moto checks neither a POST policy's content-length-range nor a presigned PUT's
signed Content-Length, like the S3-compatible stores the issue names: the bytes
land, and intake must catch them (rejected/size_mismatch, quarantined), with the
tenant's usage never past its quota. Nor does moto verify x-amz-checksum-sha256:
the tests check that it is signed into the upload, and that intake compares.
"""

from __future__ import annotations

import base64
import hashlib
import json
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from attachments.models import Attachment, Tenant, TenantUsage
from attachments.services.quotas import usage_recounted
from attachments.storage import reset_gateway
from tests.s3.support import event_for, mp4_bytes, post_events, send_upload
from tests.support import create_intent, jpeg_bytes, pdf_bytes, run_pipeline

pytestmark = [pytest.mark.s3, pytest.mark.django_db]

MIB = 1024 * 1024


def _counter(tenant_id) -> tuple[int, int]:
    row = TenantUsage.objects.get(tenant_id=tenant_id)
    return row.bytes_used, row.files_used


def _assert_size_mismatch(s3, row: Attachment, *, sent: int) -> None:
    assert run_pipeline(row.pk) == "rejected"
    row.refresh_from_db()
    assert row.reason_code == "size_mismatch" and str(sent) in row.reason_message
    assert row.quarantine_key and s3.exists(row.quarantine_key)
    assert not s3.exists(row.working_key)
    assert row.stored_size is None
    assert _counter(row.tenant_id) == (0, 0) == usage_recounted(row.tenant_id)


@pytest.mark.parametrize("method", ["POST", "PUT"])
def test_declared_small_sent_large_is_rejected_and_usage_stays_within_the_quota(
    s3, alice, api, settings, events_token, method
):
    settings.AIRLOCK_S3_UPLOAD_METHOD = method
    reset_gateway()
    declared = 1024
    data = jpeg_bytes((800, 600))
    assert len(data) > 4 * declared
    Tenant.objects.filter(slug="acme").update(quota_bytes=declared)
    created = create_intent(api(alice), size=declared)
    assert created.status_code == 201, created.content
    upload = created.json()["upload"]
    row = Attachment.objects.get(pk=created.json()["id"])
    if method == "PUT":
        signed = parse_qs(urlsplit(upload["url"]).query)["X-Amz-SignedHeaders"][0].split(";")
        assert "content-length" in signed  # S3 itself refuses another size

    response = send_upload(upload, data, filename="big.jpg")
    assert response.status_code in (200, 204), response.text  # the stand-in let it through
    assert s3.get(row.storage_key) == data
    assert post_events(event_for(s3, row.storage_key), token=events_token).status_code == 202
    assert _counter(row.tenant_id) == (declared, 1)
    _assert_size_mismatch(s3, row, sent=len(data))


def test_multipart_parts_larger_than_planned_are_rejected(s3, alice, api, settings):
    settings.AIRLOCK_S3_MULTIPART = settings.AIRLOCK_S3_MULTIPART.replace(threshold_bytes=5 * MIB, part_bytes=5 * MIB)
    reset_gateway()
    declared = 10 * MIB + 100
    data = mp4_bytes(11 * MIB)
    created = create_intent(api(alice), profile="media", filename="clip.mp4", content_type="video/mp4", size=declared)
    assert created.status_code == 201, created.content
    upload = created.json()["upload"]
    assert len(upload["parts"]) == 3 and upload["part_size"] == 5 * MIB  # the last part: 100 bytes
    etags = []
    for part, chunk in zip(upload["parts"], (data[: 5 * MIB], data[5 * MIB : 10 * MIB], data[10 * MIB :])):
        response = requests.put(part["url"], data=chunk, headers=upload["headers"], timeout=60)
        assert response.status_code == 200, response.text
        etags.append({"part_number": part["part_number"], "etag": response.headers["ETag"]})
    response = api(alice).post(upload["complete_url"], {"parts": etags}, format="json")
    assert response.status_code == 202, response.content
    row = Attachment.objects.get(pk=created.json()["id"])
    assert s3.get(row.storage_key) == data
    _assert_size_mismatch(s3, row, sent=len(data))


def _flipped(data: bytes) -> bytes:
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1 :]


def _send_and_announce(s3, upload: dict, data: bytes, events_token: str, key: str) -> None:
    response = send_upload(upload, data, filename="a.pdf")
    # moto stores the bytes whatever x-amz-checksum-sha256 says (S3 answers 400 BadDigest).
    assert response.status_code in (200, 204), response.text
    assert post_events(event_for(s3, key), token=events_token).status_code == 202


@pytest.mark.parametrize("method", ["POST", "PUT"])
def test_a_declared_digest_is_signed_into_the_upload_and_compared_at_intake(
    s3, alice, api, settings, events_token, method
):
    settings.AIRLOCK_S3_UPLOAD_METHOD = method
    reset_gateway()
    client = api(alice)
    data = pdf_bytes()
    digest = hashlib.sha256(data)
    b64 = base64.b64encode(digest.digest()).decode()
    good, bad = (
        client.post(
            "/api/v1/uploads",
            {
                "profile": "document",
                "filename": "a.pdf",
                "size": len(data),
                "content_type": "application/pdf",
                "sha256": b64,
            },
            format="json",
        ).json()
        for _ in range(2)
    )
    for created in (good, bad):
        upload = created["upload"]
        if method == "PUT":
            assert upload["headers"]["x-amz-checksum-sha256"] == b64
            signed = parse_qs(urlsplit(upload["url"]).query)["X-Amz-SignedHeaders"][0].split(";")
            assert {"x-amz-checksum-sha256", "content-length"} <= set(signed)
        else:
            assert upload["fields"]["x-amz-checksum-sha256"] == b64
            policy = json.loads(base64.b64decode(upload["fields"]["policy"]))
            assert {"x-amz-checksum-sha256": b64} in policy["conditions"]

    bad_row = Attachment.objects.get(pk=bad["id"])
    _send_and_announce(s3, bad["upload"], _flipped(data), events_token, bad_row.storage_key)
    assert run_pipeline(bad_row.pk) == "rejected"
    bad_row.refresh_from_db()
    assert bad_row.reason_code == "checksum_mismatch" and s3.exists(bad_row.quarantine_key)
    assert client.get(f"/api/v1/attachments/{bad_row.pk}").json()["sha256"] is None

    good_row = Attachment.objects.get(pk=good["id"])
    _send_and_announce(s3, good["upload"], data, events_token, good_row.storage_key)
    assert run_pipeline(good_row.pk) == "ready"
    assert client.get(f"/api/v1/attachments/{good_row.pk}").json()["sha256"] == digest.hexdigest()
    assert usage_recounted(good_row.tenant_id) == (len(data), 1)


def test_multipart_with_a_declared_digest_is_compared_at_intake(s3, alice, api, settings):
    settings.AIRLOCK_S3_MULTIPART = settings.AIRLOCK_S3_MULTIPART.replace(threshold_bytes=5 * MIB, part_bytes=5 * MIB)
    reset_gateway()
    data = mp4_bytes(6 * MIB)
    created = api(alice).post(
        "/api/v1/uploads",
        {
            "profile": "media",
            "filename": "clip.mp4",
            "size": len(data),
            "content_type": "video/mp4",
            "sha256": hashlib.sha256(data).hexdigest(),
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    row = Attachment.objects.get(pk=created.json()["id"])
    upload = created.json()["upload"]
    assert "x-amz-checksum-sha256" not in upload["headers"]  # parts cannot carry the whole file's digest
    sent = _flipped(data)
    etags = []
    for part, chunk in zip(upload["parts"], (sent[: 5 * MIB], sent[5 * MIB :])):
        response = requests.put(part["url"], data=chunk, headers=upload["headers"], timeout=60)
        assert response.status_code == 200, response.text
        etags.append({"part_number": part["part_number"], "etag": response.headers["ETag"]})
    assert api(alice).post(upload["complete_url"], {"parts": etags}, format="json").status_code == 202
    assert run_pipeline(row.pk) == "rejected"
    row.refresh_from_db()
    assert row.reason_code == "checksum_mismatch"
