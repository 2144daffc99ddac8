"""On S3 (moto server over HTTP) the upload page sends files with Uppy's AwsS3 plugin wired to Airlock's
intents: presigned POST or PUT straight to the bucket, multipart with the intent's part URLs (re-signed
through POST /uploads/{id}/parts), assembled by POST /uploads/{id}/complete; a dropped connection, and a
reload mid-upload that Golden Retriever resumes from the parts already in the bucket."""

import re

import pytest
from playwright.sync_api import expect

from attachments.models import Attachment
from tests.browser.conftest import open_upload_page, pick_files, upload_item, watch_csp
from tests.s3.conftest import moto_endpoint, s3  # noqa: F401  (the S3 stand-in, over HTTP)
from tests.s3.support import mp4_bytes
from tests.support import jpeg_bytes, png_bytes

pytestmark = [pytest.mark.browser, pytest.mark.s3, pytest.mark.django_db(transaction=True)]

MIB = 1024 * 1024


@pytest.fixture
def bucket(s3, settings):  # noqa: F811
    from attachments.storage import reset_gateway

    settings.AIRLOCK_S3_MULTIPART = settings.AIRLOCK_S3_MULTIPART.replace(threshold_bytes=5 * MIB, part_bytes=5 * MIB)
    reset_gateway()
    # What `manage.py s3_setup --apply` gives a bucket browsers upload to: PUT and POST allowed, ETag exposed.
    s3.client.put_bucket_cors(
        Bucket=s3.bucket,
        CORSConfiguration={
            "CORSRules": [
                {
                    "AllowedOrigins": ["*"],
                    "AllowedMethods": ["PUT", "POST", "GET"],
                    "AllowedHeaders": ["*"],
                    "ExposeHeaders": ["ETag"],
                }
            ]
        },
    )
    return s3


def intents_of(page) -> list[str]:
    """Record the ids of the intents the page makes (POST /api/v1/uploads)."""
    ids: list[str] = []
    page.on(
        "response",
        lambda r: (
            ids.append(r.json()["id"])
            if r.request.method == "POST" and r.url.endswith("/api/v1/uploads") and r.status == 201
            else None
        ),
    )
    return ids


def test_presigned_post_and_a_dropped_connection_retried_as_a_new_intent(page, live_server, live_worker, alice, bucket):
    violations = watch_csp(page)
    intents = intents_of(page)
    open_upload_page(page, live_server, "alice")

    # The first form POST to the bucket loses its connection; the page then offers Retry.
    dropped: list[str] = []

    def drop_once(route):
        if route.request.method == "POST" and not dropped:
            dropped.append(route.request.url)
            route.abort("connectionreset")
        else:
            route.continue_()

    page.route(lambda url: url.startswith(bucket.endpoint), drop_once)
    pick_files(page, [{"name": "second.png", "mimeType": "image/png", "buffer": png_bytes((300, 200))}])
    item = upload_item(page, "second.png")
    expect(item).to_have_attribute("data-status", "error", timeout=30_000)
    expect(item).to_have_attribute("data-via", "s3-post")
    expect(item.locator(".reason")).to_contain_text("network error")
    failed_id = item.get_attribute("data-id")

    item.locator("button.retry").click()
    expect(item).to_have_attribute("data-status", "ready", timeout=60_000)
    retried_id = item.get_attribute("data-id")
    assert retried_id != failed_id and intents == [failed_id, retried_id]
    expect(item.locator(".thumb img")).to_have_attribute("data-kind", "thumbnail")
    assert Attachment.objects.get(pk=failed_id).lifecycle == "discarded"  # the failed attempt was cleaned up
    row = Attachment.objects.get(pk=retried_id)
    assert row.status == "ready" and row.profile == "image"
    assert violations == [], violations


def test_presigned_put(page, live_server, live_worker, alice, bucket, settings):
    settings.AIRLOCK_S3_UPLOAD_METHOD = "PUT"
    open_upload_page(page, live_server, "alice")
    methods: list[str] = []
    page.on("request", lambda r: methods.append(r.method) if r.url.startswith(bucket.endpoint) else None)
    pick_files(page, [{"name": "photo.jpg", "mimeType": "image/jpeg", "buffer": jpeg_bytes((640, 480))}])
    item = upload_item(page, "photo.jpg")
    expect(item).to_have_attribute("data-status", "ready", timeout=60_000)
    expect(item).to_have_attribute("data-via", "s3-put")
    assert "PUT" in methods and "POST" not in methods
    assert Attachment.objects.get(pk=item.get_attribute("data-id")).size > 0


def test_a_large_file_goes_up_in_parts_and_a_failed_part_is_retried(page, live_server, live_worker, alice, bucket):
    open_upload_page(page, live_server, "alice", "media")

    # The first PUT of part 2 loses its connection; Uppy sends that part again with a re-signed URL.
    dropped: list[str] = []
    resigned: list[str] = []

    def drop_once(route):
        if not dropped:
            dropped.append(route.request.url)
            route.abort("connectionreset")
        else:
            route.continue_()

    page.route(lambda url: url.startswith(bucket.endpoint) and "partNumber=2" in url, drop_once)
    page.on("request", lambda r: resigned.append(r.url) if r.url.endswith("/parts") else None)

    data = mp4_bytes(11 * MIB)
    pick_files(page, [{"name": "clip.mp4", "mimeType": "video/mp4", "buffer": data}])
    item = upload_item(page, "clip.mp4")
    expect(item).to_have_attribute("data-status", "ready", timeout=90_000)
    expect(item).to_have_attribute("data-via", "s3-multipart")

    parts = item.locator("ol.parts li.part")
    expect(parts).to_have_count(3)
    assert dropped, "part 2 was dropped once"
    assert [parts.nth(i).get_attribute("data-state") for i in range(3)] == ["done"] * 3
    assert [parts.nth(i).get_attribute("data-attempts") for i in range(3)] == ["1", "2", "1"]
    assert len(resigned) == 1  # the part sent again got a fresh URL
    row = Attachment.objects.get(pk=item.get_attribute("data-id"))
    assert row.multipart_upload_id is None and row.status == "ready"
    assert bucket.get(row.working_key) == data  # intake keeps the scanned bytes at a server-only key


def test_a_reload_mid_multipart_upload_resumes_from_the_parts_in_the_bucket(
    page, live_server, live_worker, alice, bucket
):
    intents = intents_of(page)
    open_upload_page(page, live_server, "alice")

    held: list = []
    sent: list[int] = []

    def hold_part_2(route):
        number = int(re.search(r"partNumber=(\d+)", route.request.url).group(1))
        sent.append(number)
        if number == 2:
            held.append(route)  # no answer: the upload hangs with part 2 in flight
            return
        route.continue_()

    def parts(url: str) -> bool:
        return url.startswith(bucket.endpoint) and "partNumber=" in url

    page.route(parts, hold_part_2)
    data = mp4_bytes(11 * MIB)
    pick_files(page, [{"name": "clip.mp4", "mimeType": "video/mp4", "buffer": data}])
    item = upload_item(page, "clip.mp4")
    expect(item.locator('ol.parts li.part[data-state="done"]')).to_have_count(2, timeout=60_000)  # 1 and 3
    assert held and sorted(sent) == [1, 2, 3]
    upload_id = item.get_attribute("data-id")

    # The user reloads; Golden Retriever restores the file and its multipart upload.
    sent_after: list[int] = []
    page.route(
        parts,
        lambda route: (
            sent_after.append(int(re.search(r"partNumber=(\d+)", route.request.url).group(1))),
            route.continue_(),
        ),
    )
    page.reload()
    item = upload_item(page, "clip.mp4")
    expect(item).to_have_attribute("data-status", "ready", timeout=90_000)
    assert item.get_attribute("data-id") == upload_id and intents == [upload_id]  # no new intent
    assert sent_after == [2]  # only the part the bucket did not have
    row = Attachment.objects.get(pk=upload_id)
    assert row.status == "ready" and bucket.get(row.working_key) == data
