"""What a photo costs the bucket: our S3 requests per file, by operation, pinned so that they cannot creep back.

Counted as bench/capacity.py counts them (s3_requests_per_photo): every request
the gateway's boto3 client sends, with botocore's before-send event, against
the moto server. The client's own upload (a presigned POST straight to the
bucket) is not ours and not counted. The upload is announced with "complete",
which HEADs the object, as a client that has no storage events would.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from attachments.models import Attachment
from tests.s3.support import intent, send_upload
from tests.support import jpeg_bytes, run_pipeline

pytestmark = [pytest.mark.s3, pytest.mark.django_db]


@pytest.fixture
def s3_requests(s3) -> Iterator[list[str]]:
    """The operation of every request the gateway's client sends, in order."""
    from attachments.storage import get_gateway

    sent: list[str] = []

    def record(request, **_kwargs):
        sent.append(request.context.get("operation_name") or request.method)

    # The operation's name is put on the request's context by before-call; before-send sees it there.
    def name(model, context, **_kwargs):
        context["operation_name"] = model.name

    events = get_gateway().client.meta.events
    events.register("before-call.s3", name, unique_id="test-request-counts-name")
    events.register("before-send.s3", record, unique_id="test-request-counts")
    yield sent
    events.unregister("before-send.s3", unique_id="test-request-counts")
    events.unregister("before-call.s3", unique_id="test-request-counts-name")


# complete's HEAD; intake's snapshot (a COPY to the server-only key, no HEAD of the upload first: a missing
# upload fails the COPY), the HEAD that verifies the copy, the upload key's DELETE; one GET of the snapshot for
# intake and every scanner; derive's spool check (a HEAD before it reuses that copy in the same process); one
# PUT per derivative (sanitized copy, thumbnail), with no HEAD after: S3 answered each with its ETag.
# 8 requests, from 14 (7 HEAD, 3 GET, ...); issue #46's goal is 6 (left: the derive's spool HEAD, the copy's).
EXPECTED = {"HeadObject": 3, "CopyObject": 1, "DeleteObject": 1, "GetObject": 1, "PutObject": 2}


def test_a_photo_costs_our_s3_requests(s3, alice, api, s3_requests):
    client = api(alice)
    data = jpeg_bytes((640, 480))
    created = intent(client, data)
    assert send_upload(created["upload"], data).status_code in (200, 201, 204)
    sent_before_ours = list(s3_requests)
    assert client.post(f"/api/v1/uploads/{created['id']}/complete").status_code == 202
    assert run_pipeline(created["id"]) == "ready"
    ours = s3_requests[len(sent_before_ours) :]
    assert Counter(ours) == EXPECTED, ours
    assert Attachment.objects.get(pk=created["id"]).status == "ready"
