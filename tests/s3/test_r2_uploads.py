"""The R2 flavor of the S3 gateway (moto as the bucket): presigned PUT, equal parts, s3_setup's wrangler steps."""

from __future__ import annotations

from io import StringIO
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core.management import call_command

from attachments.models import Attachment
from attachments.storage import StorageError, reset_gateway
from attachments.storage.s3 import S3Gateway, s3_flavor
from tests.s3.support import intent, post_events, r2_body_for, send_parts, send_upload
from tests.support import jpeg_bytes, run_pipeline

pytestmark = [pytest.mark.s3]

MIB = 1 << 20


@pytest.fixture
def r2(s3, settings):
    """The moto bucket, with the gateway told it is R2 (and the upload method left to the flavor)."""
    settings.AIRLOCK_S3_FLAVOR = "r2"
    settings.AIRLOCK_S3_UPLOAD_METHOD = None
    reset_gateway()
    return s3


@pytest.mark.parametrize(
    ("flavor", "endpoint", "expected"),
    [
        (None, "https://3f4b7e3dcab231cbfdaa90a6a28bd548.r2.cloudflarestorage.com", "r2"),
        (None, "https://acc.eu.r2.cloudflarestorage.com", "r2"),
        (None, "https://s3.eu-west-1.amazonaws.com", "s3"),
        (None, "http://127.0.0.1:9000", "s3"),
        (None, None, "s3"),
        ("R2", "http://127.0.0.1:9000", "r2"),
        ("s3", "https://acc.r2.cloudflarestorage.com", "s3"),
    ],
)
def test_the_flavor_is_set_or_detected_from_the_endpoint(flavor, endpoint, expected):
    assert s3_flavor(flavor=flavor, endpoint_url=endpoint) == expected


def test_r2_refuses_presigned_post_and_an_unknown_flavor():
    with pytest.raises(StorageError, match="R2 has no presigned POST"):
        S3Gateway(bucket="b", endpoint_url="https://acc.r2.cloudflarestorage.com", upload_method="POST")
    with pytest.raises(StorageError, match="must be s3 or r2"):
        S3Gateway(bucket="b", flavor="gcs")
    assert S3Gateway(bucket="b", endpoint_url="https://acc.r2.cloudflarestorage.com").upload_method == "PUT"
    assert S3Gateway(bucket="b").upload_method == "POST"  # S3 keeps its default


@pytest.mark.django_db
def test_r2_plan_is_a_presigned_put_with_length_and_type_signed(r2, alice, api, events_token):
    data = jpeg_bytes((64, 64))
    created = intent(api(alice), data, filename="r2.jpg", content_type="image/jpeg")
    upload = created["upload"]
    assert upload["method"] == "PUT" and upload["fields"] == {}
    assert upload["headers"]["Content-Type"] == "image/jpeg"
    signed = parse_qs(urlsplit(upload["url"]).query)["X-Amz-SignedHeaders"][0].split(";")
    assert {"content-length", "content-type", "host"} <= set(signed)
    assert send_upload(upload, data).status_code == 200
    key = Attachment.objects.get(pk=created["id"]).storage_key
    # R2 says so on its queue; the relay posts the body as it is.
    answer = post_events(r2_body_for(r2, key), token=events_token).json()
    assert answer["results"][0]["outcome"] == "started"
    assert run_pipeline(created["id"]) == "ready"


@pytest.mark.django_db
def test_r2_multipart_parts_are_one_size_but_the_last(r2, alice, api, settings):
    settings.AIRLOCK_S3_MULTIPART = settings.AIRLOCK_S3_MULTIPART.replace(threshold_bytes=5 * MIB, part_bytes=5 * MIB)
    reset_gateway()
    data = b"\x00\x00\x00\x18ftypmp42" + bytes(11 * MIB + 12345 - 12)
    created = intent(api(alice), data, profile="media", filename="clip.mp4", content_type="video/mp4")
    upload = created["upload"]
    assert upload["part_size"] == 5 * MIB and len(upload["parts"]) == 3
    etags = send_parts(upload, data, headers=upload["headers"])
    row = Attachment.objects.get(pk=created["id"])
    listed = r2.client.list_parts(Bucket=r2.bucket, Key=row.storage_key, UploadId=row.multipart_upload_id)["Parts"]
    assert [p["Size"] for p in listed] == [5 * MIB, 5 * MIB, len(data) - 10 * MIB]  # R2: one size but the last
    response = api(alice).post(upload["complete_url"], {"parts": etags}, format="json")
    assert response.status_code == 202
    assert r2.get(Attachment.objects.get(pk=created["id"]).storage_key) == data


def test_s3_setup_on_r2_checks_cors_and_prints_the_wrangler_steps(r2, settings):
    settings.AIRLOCK_CORS_ALLOWED_ORIGINS = ["https://app.example.com"]
    out = StringIO()
    call_command("s3_setup", "--apply", "--r2-queue", "airlock-events", stdout=out)
    text = out.getvalue()
    assert "fixed: CORS rule airlock-browser-uploads: missing" in text
    assert r2.client.get_bucket_cors(Bucket=r2.bucket)["CORSRules"][0]["AllowedOrigins"] == ["https://app.example.com"]
    assert "R2 does not set these through its S3 API" in text
    for line in (
        "npx wrangler queues create airlock-events",
        "npx wrangler queues create airlock-events-dlq",
        "npx wrangler queues consumer http add airlock-events --message-retries 3 "
        "--dead-letter-queue airlock-events-dlq --visibility-timeout-secs 60",
        f"npx wrangler r2 bucket notification create {r2.bucket} --queue airlock-events --prefix tenants/ "
        "--event-type object-create",
        f"npx wrangler r2 bucket notification create {r2.bucket} --queue airlock-events --prefix tenants/ "
        "--event-type object-delete",
    ):
        assert f"  {line}\n" in text
    # A second run: no drift, and the steps are printed again (the S3 API cannot tell whether they were run).
    out = StringIO()
    call_command("s3_setup", "--dry-run", stdout=out)
    assert "no drift" in out.getvalue() and f"{r2.bucket}-events-dlq" in out.getvalue()


def test_s3_setup_on_s3_prints_no_wrangler_steps(s3, settings):
    out = StringIO()
    call_command("s3_setup", "--dry-run", stdout=out)
    assert "wrangler" not in out.getvalue()
