"""What a photo costs the bucket: our S3 requests per file, by operation, pinned so that they cannot creep back.

Counted as bench/capacity.py counts them (s3_requests_per_photo): every HTTP
request the gateway's boto3 client sends (botocore's before-send event, retries
included), against the moto server. The client's own upload (a presigned POST
straight to the bucket) is not ours and not counted. The upload is announced
with "complete", which HEADs the object, as a client that has no storage events
would. The requests cut here keep their verdicts: an upload that is gone is
still rejected (object_missing), storage that is down is still waited for.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator

import pytest

from attachments.models import Attachment
from attachments.storage.base import StorageError
from processing import pipeline
from processing.spool import get_spool
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


# 6 requests of ours: complete's HEAD (its ETag and size kept on the row); intake, which runs the scan: the
# snapshot's COPY (no HEAD of the upload first: a missing one fails the COPY; no HEAD of the copy either: S3
# answers the COPY with the ETag complete saw, so the bytes and their size are the ones complete saw), the
# upload key's DELETE (no HEAD first: the COPY just read it), then one GET into the spool (no HEAD: the spool
# takes the snapshot's ETag and size) that the sniff, the digest check and every scanner read; derive: no HEAD
# (the snapshot is written once: the row's size and the spool's copy stand), one PUT per derivative (sanitized
# copy, thumbnail), no HEAD after: S3 answered each PUT. Intake and scan as two stages took 8 (2 HEAD, 2 GET):
# the sniff's ranged GET and the scan spool's HEAD went.
EXPECTED = {"HeadObject": 1, "CopyObject": 1, "DeleteObject": 1, "GetObject": 1, "PutObject": 2}


def _uploaded(client, data: bytes) -> str:
    created = intent(client, data)
    assert send_upload(created["upload"], data).status_code in (200, 201, 204)
    assert client.post(f"/api/v1/uploads/{created['id']}/complete").status_code == 202
    return created["id"]


def test_a_photo_costs_our_s3_requests(s3, alice, api, s3_requests):
    client = api(alice)
    data = jpeg_bytes((640, 480))
    created = intent(client, data)
    assert send_upload(created["upload"], data).status_code in (200, 201, 204)
    assert s3_requests == []  # the intent and the client's upload: no request of ours
    assert client.post(f"/api/v1/uploads/{created['id']}/complete").status_code == 202
    assert run_pipeline(created["id"]) == "ready"
    assert Counter(s3_requests) == EXPECTED, s3_requests


def test_an_upload_gone_before_its_snapshot_fails_the_copy_and_is_rejected_object_missing(s3, alice, api, s3_requests):
    attachment_id = _uploaded(api(alice), jpeg_bytes((64, 48)))
    row = Attachment.objects.get(pk=attachment_id)
    s3.delete(row.storage_key)  # straight at moto, not through the gateway: not counted
    del s3_requests[:]
    assert run_pipeline(attachment_id) == "rejected"
    row.refresh_from_db()
    assert (row.reason_code, row.attempts, row.content_key) == ("object_missing", 0, "")
    assert s3_requests == ["CopyObject", "HeadObject"]  # the COPY's 404, then the look that finds nothing


def test_storage_down_at_the_snapshot_is_a_wait_not_an_attempt(s3, alice, api, monkeypatch):
    from attachments.storage.s3 import S3Gateway
    from processing import outages

    monkeypatch.setattr(outages, "STORAGE_RETRY_SECONDS", 0.05)
    attachment_id = _uploaded(api(alice), jpeg_bytes((64, 48)))

    def refused(*args, **kwargs):
        raise StorageError("connection refused")

    with monkeypatch.context() as down:
        for name in ("copy", "head", "ping"):
            down.setattr(S3Gateway, name, refused)
        assert pipeline.start_and_intake(uuid.UUID(attachment_id)) == "waiting"
    row = Attachment.objects.get(pk=attachment_id)
    assert (row.status, row.attempts, row.content_key) == ("pending", 0, "")
    assert s3.exists(row.storage_key)
    assert run_pipeline(attachment_id) == "ready"


def test_an_upload_replaced_after_complete_is_measured_again_at_its_snapshot(s3, alice, api, s3_requests):
    data = jpeg_bytes((64, 48))
    attachment_id = _uploaded(api(alice), data)
    row = Attachment.objects.get(pk=attachment_id)
    assert (row.arrived_size, bool(row.arrived_etag)) == (len(data), True)  # what complete's HEAD saw
    other = jpeg_bytes((640, 480))
    assert len(other) != len(data)
    s3.put(row.storage_key, other, "image/jpeg")  # a replay of the upload after complete: not counted
    del s3_requests[:]
    # The copy's ETag is not the one complete saw: its size is asked for, not taken from the row, and
    # the bytes the snapshot holds are the ones checked (here against the size the intent declared).
    assert run_pipeline(attachment_id) == "rejected"
    row.refresh_from_db()
    assert row.reason_code == "size_mismatch"
    assert row.reason_message.startswith(f"Stored {len(other)} bytes"), row.reason_message
    assert s3_requests[:3] == ["CopyObject", "HeadObject", "DeleteObject"], s3_requests


def test_a_snapshot_gone_before_derive_is_found_by_its_download(s3, alice, api, s3_requests, monkeypatch):
    from processing import outages

    monkeypatch.setattr(outages, "STORAGE_RETRY_SECONDS", 0.05)
    attachment_id = _uploaded(api(alice), jpeg_bytes((64, 48)))
    assert pipeline.start_and_intake(uuid.UUID(attachment_id)) == "advanced"  # intake, with its scan
    row = Attachment.objects.get(pk=attachment_id)
    assert (row.step, bool(row.content_key)) == ("derive", True)
    get_spool().clear()  # derive on another worker: no copy here to reuse
    s3.delete(row.content_key)
    del s3_requests[:]
    # No HEAD asks first: the GET finds it gone, and the stage is retried, as when a HEAD found it gone;
    # the retry's intake then finds nothing at the snapshot key: object_missing.
    assert pipeline.run_stage(row.pk, row.lease_token, row.step) == "retried"
    assert "HeadObject" not in s3_requests and "GetObject" in s3_requests, s3_requests
    row.refresh_from_db()
    assert (row.status, row.attempts) == ("pending", 1)
    assert run_pipeline(attachment_id) == "rejected"
    row.refresh_from_db()
    assert (row.reason_code, row.attempts) == ("object_missing", 1)
