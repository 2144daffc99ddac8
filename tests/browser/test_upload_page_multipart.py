"""The upload page sends a large file to S3 (moto server over HTTP) through upload.parts: per-part progress,
a failed part retried, then assembled and processed."""

import pytest
from playwright.sync_api import expect

from attachments.models import Attachment
from tests.browser.conftest import open_upload_page
from tests.s3.conftest import moto_endpoint, s3  # noqa: F401  (the S3 stand-in, over HTTP)
from tests.s3.support import mp4_bytes

pytestmark = [pytest.mark.browser, pytest.mark.s3, pytest.mark.django_db(transaction=True)]

MIB = 1024 * 1024


@pytest.fixture
def multipart_bucket(s3, settings):  # noqa: F811
    from attachments.storage import reset_gateway

    settings.AIRLOCK_S3_MULTIPART_THRESHOLD = 5 * MIB
    settings.AIRLOCK_S3_PART_SIZE = 5 * MIB
    reset_gateway()
    # What the README asks of a bucket browsers upload to: PUT allowed, ETag exposed.
    s3.client.put_bucket_cors(Bucket=s3.bucket, CORSConfiguration={"CORSRules": [{
        "AllowedOrigins": ["*"], "AllowedMethods": ["PUT", "POST", "GET"], "AllowedHeaders": ["*"],
        "ExposeHeaders": ["ETag"]}]})
    return s3


def test_a_large_file_goes_up_in_parts_and_a_failed_part_is_retried(page, live_server, live_worker, alice,
                                                                   multipart_bucket):
    open_upload_page(page, live_server, "alice", "media")

    # The first PUT of part 2 loses its connection; the page sends that part again.
    dropped: list[str] = []

    def drop_once(route):
        if not dropped:
            dropped.append(route.request.url)
            route.abort("connectionreset")
        else:
            route.continue_()

    page.route(lambda url: url.startswith(multipart_bucket.endpoint) and "partNumber=2" in url, drop_once)

    data = mp4_bytes(11 * MIB)
    page.set_input_files("#files", [{"name": "clip.mp4", "mimeType": "video/mp4", "buffer": data}])
    item = page.locator("#items li.item").filter(has=page.locator(".name", has_text="clip.mp4"))
    parts = item.locator("ol.parts li.part")
    expect(parts).to_have_count(3)
    expect(item).to_have_attribute("data-status", "ready", timeout=90_000)

    assert dropped, "part 2 was dropped once"
    assert [parts.nth(i).get_attribute("data-state") for i in range(3)] == ["done"] * 3
    assert [parts.nth(i).get_attribute("data-attempts") for i in range(3)] == ["1", "2", "1"]
    row = Attachment.objects.get(pk=item.get_attribute("data-id"))
    assert row.multipart_upload_id is None and row.status == "ready"
    assert multipart_bucket.get(row.working_key) == data  # intake keeps the scanned bytes at a server-only key
