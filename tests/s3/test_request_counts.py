"""What a photo costs the bucket: our S3 requests per file, by operation, pinned so that they cannot creep back.

Counted as bench/capacity.py counts them (s3_requests_per_photo): every HTTP
request the gateway's boto3 client sends (botocore's before-send event, retries
included), against the moto server. The client's own upload (a presigned POST
straight to the bucket) is not ours and not counted. The upload is announced
with "complete", which HEADs the object, as a client that has no storage events
would.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from tests.s3.support import intent, send_upload
from tests.support import jpeg_bytes, run_pipeline

pytestmark = [pytest.mark.s3, pytest.mark.django_db]


@pytest.fixture
def s3_requests(s3) -> Iterator[list[str]]:
    """The operation of every request the gateway's client sends, in order."""
    from attachments.storage import get_gateway

    sent: list[str] = []

    def record(event_name: str, **_kwargs) -> None:
        sent.append(event_name.rsplit(".", 1)[-1])  # before-send.s3.<Operation>

    events = get_gateway().client.meta.events
    events.register("before-send.s3", record, unique_id="test-request-counts")
    yield sent
    events.unregister("before-send.s3", unique_id="test-request-counts")


# complete's HEAD; intake: a HEAD of the upload, the snapshot's managed copy (a HEAD of its source, then
# the COPY), the HEAD that verifies the copy, the upload key's delete (a HEAD, then the DELETE), the sniff's
# ranged GET; scan: one spooled GET for every scanner; derive: the spool's HEAD before it reuses that
# copy, one PUT per derivative (sanitized copy, thumbnail) and a HEAD after each.
EXPECTED = {"HeadObject": 9, "CopyObject": 1, "DeleteObject": 1, "GetObject": 2, "PutObject": 2}


def test_a_photo_costs_our_s3_requests(s3, alice, api, s3_requests):
    client = api(alice)
    data = jpeg_bytes((640, 480))
    created = intent(client, data)
    assert send_upload(created["upload"], data).status_code in (200, 201, 204)
    assert s3_requests == []  # the intent and the client's upload: no request of ours
    assert client.post(f"/api/v1/uploads/{created['id']}/complete").status_code == 202
    assert run_pipeline(created["id"]) == "ready"
    assert Counter(s3_requests) == EXPECTED, s3_requests
