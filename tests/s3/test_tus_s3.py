"""tus on S3 (moto over HTTP): a multipart upload behind the scenes, its tail in the database, aborted
when the transfer ends without its last byte (termination, expiry)."""

from __future__ import annotations

import base64
import hashlib
from datetime import timedelta

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given, note
from hypothesis import settings as hypothesis_settings

from attachments.models import Attachment, StorageEvent, TusUpload
from tests.s3.support import mp4_bytes
from tests.security.test_tus_interleavings import interleavings

pytestmark = [pytest.mark.s3, pytest.mark.django_db]

MIB = 1 << 20
TUS = {"HTTP_TUS_RESUMABLE": "1.0.0"}


def _create(client, length: int) -> str:
    meta = ",".join(
        f"{k} {base64.b64encode(v.encode()).decode()}"
        for k, v in {"profile": "media", "filename": "clip.mp4", "content_type": "video/mp4"}.items()
    )
    response = client.post("/api/v1/tus/", **TUS, HTTP_UPLOAD_LENGTH=str(length), HTTP_UPLOAD_METADATA=meta)
    assert response.status_code == 201, response.content
    return response["Location"].removeprefix("http://testserver")


def _patch(client, path: str, body: bytes, offset: int, **extra):
    return client.generic(
        "PATCH",
        path,
        body,
        content_type="application/offset+octet-stream",
        **TUS,
        HTTP_UPLOAD_OFFSET=str(offset),
        **extra,
    )


def _multipart_uploads(s3) -> list[dict]:
    return s3.client.list_multipart_uploads(Bucket=s3.bucket).get("Uploads", [])


def test_chunks_wait_in_the_database_until_a_part_is_full_then_the_last_byte_completes(s3, alice, api):
    client = api(alice)
    data = mp4_bytes(12 * MIB + 17)
    path = _create(client, len(data))
    pk = path.rsplit("/", 1)[1]
    key = Attachment.objects.get(pk=pk).storage_key

    assert _patch(client, path, data[: 3 * MIB], 0)["Upload-Offset"] == str(3 * MIB)
    upload = TusUpload.objects.get(pk=pk)
    assert len(bytes(upload.tail)) == 3 * MIB and upload.parts == [] and not upload.s3_upload_id
    assert _multipart_uploads(s3) == []  # under one part: nothing in the bucket yet

    assert _patch(client, path, data[3 * MIB : 6 * MIB], 3 * MIB)["Upload-Offset"] == str(6 * MIB)
    upload.refresh_from_db()
    assert [size for _, _, size in upload.parts] == [5 * MIB] and len(bytes(upload.tail)) == MIB
    (listed,) = _multipart_uploads(s3)
    assert listed["Key"] == key and listed["UploadId"] == upload.s3_upload_id
    assert not s3.exists(key)

    # The rest in one checksummed chunk: received whole and verified before any of it goes to S3.
    rest = data[6 * MIB :]
    digest = base64.b64encode(hashlib.sha256(rest).digest()).decode()
    wrong = base64.b64encode(hashlib.sha256(b"x").digest()).decode()
    refused = _patch(client, path, rest, 6 * MIB, HTTP_UPLOAD_CHECKSUM=f"sha256 {wrong}")
    assert refused.status_code == 460
    upload.refresh_from_db()
    assert upload.offset == 6 * MIB and len(upload.parts) == 1 and len(bytes(upload.tail)) == MIB
    done = _patch(client, path, rest, 6 * MIB, HTTP_UPLOAD_CHECKSUM=f"sha256 {digest}")
    assert done.status_code == 204 and done["Upload-Offset"] == str(len(data))
    assert s3.get(key) == data
    assert _multipart_uploads(s3) == []
    upload.refresh_from_db()
    assert upload.state == "complete" and bytes(upload.tail) == b"" and not upload.staged
    assert StorageEvent.objects.get(key=key, source="tus").outcome == "started"
    assert Attachment.objects.get(pk=pk).uploaded_at is not None


def test_expiry_and_termination_abort_the_multipart_upload(s3, alice, api):
    from sweeper.control import sweeper_control_set
    from sweeper.sweep import sweep_expired

    client = api(alice)
    data = mp4_bytes(8 * MIB)
    first, second = _create(client, len(data)), _create(client, len(data))
    for path in (first, second):
        assert _patch(client, path, data[: 6 * MIB], 0).status_code == 204
    assert len(_multipart_uploads(s3)) == 2

    TusUpload.objects.filter(pk=first.rsplit("/", 1)[1]).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert client.head(first, **TUS).status_code == 410
    assert sweep_expired(trigger="test").tus_expired == 1
    assert len(_multipart_uploads(s3)) == 1
    assert TusUpload.objects.get(pk=first.rsplit("/", 1)[1]).state == "expired"

    # Terminated under the killswitch: the parts stay until a sweep runs without it.
    sweeper_control_set(killswitch=True, actor="test")
    assert client.delete(second, **TUS).status_code == 204
    assert len(_multipart_uploads(s3)) == 1
    sweeper_control_set(killswitch=False, actor="test")
    assert sweep_expired(trigger="test").tus_expired == 1
    assert _multipart_uploads(s3) == []
    assert client.head(second, **TUS).status_code == 404


def test_an_upload_under_one_part_is_one_object(s3, alice, api):
    client = api(alice)
    data = mp4_bytes(300_000)
    path = _create(client, len(data))
    for start in range(0, len(data), 100_000):
        assert _patch(client, path, data[start : start + 100_000], start).status_code == 204
    assert _multipart_uploads(s3) == []
    assert s3.get(Attachment.objects.get(pk=path.rsplit("/", 1)[1]).storage_key) == data


@pytest.mark.parametrize("length", [64 * 1024, 5 * MIB + 64 * 1024])
def test_a_writer_that_lost_its_claim_never_writes_the_object(s3, alice, settings, length):
    """Issue #26 on S3: PATCH A stalls, B takes the stale claim over and completes, the file is scanned
    and ready; A's body resumes. A must stop (its claim is gone), never write the object it no longer owns."""
    from attachments.errors import AirlockError
    from attachments.storage import reset_gateway
    from attachments.uploads.services.tus import UploadLocked, tus_upload_append, tus_upload_create, tus_upload_recover
    from tests.security.test_tus_writer_race import CLEAN_ACTION, LAUNCH_ACTION, _pdfs
    from tests.support import run_pipeline

    settings.AIRLOCK_S3_UPLOAD_METHOD = "PUT"  # no snapshot at intake: the upload key is the served key
    reset_gateway()
    clean, evil = _pdfs()
    pad = length - len(clean)  # a PDF reader ignores what follows %%EOF; both get the same padding
    clean, evil = clean + b"\n" * pad, evil + b"\n" * pad
    split = evil.index(LAUNCH_ACTION) - 10
    assert clean[:split] == evil[:split] and CLEAN_ACTION in clean
    upload = tus_upload_create(
        user=alice, length=len(evil), profile_name="document", filename="q3.pdf", content_type="application/pdf"
    )
    key = Attachment.objects.get(pk=upload.pk).storage_key
    during_the_stall: list[object] = []

    def takeover() -> None:
        later = timezone.now() + timedelta(minutes=2)  # A's claim is stale by the clock
        at = tus_upload_recover(user=alice, attachment_id=upload.pk, now=later).offset
        tus_upload_append(
            user=alice,
            attachment_id=upload.pk,
            offset=at,
            chunks=[clean[at:]],
            content_length=len(clean) - at,
            now=later,
        )
        during_the_stall.append(run_pipeline(upload.pk))

    def stalled_body():
        yield evil[:split]
        takeover()
        yield evil[split:]

    with pytest.raises(AirlockError) as refused:
        tus_upload_append(
            user=alice, attachment_id=upload.pk, offset=0, chunks=stalled_body(), content_length=len(evil)
        )
    attachment = Attachment.objects.get(pk=upload.pk)
    served = s3.get(key)
    assert during_the_stall == ["ready"] and attachment.status == "ready"
    assert hashlib.sha256(served).hexdigest() == attachment.sha256
    assert served == clean
    assert isinstance(refused.value, UploadLocked)
    assert _multipart_uploads(s3) == []  # nothing left behind by either writer


@hypothesis_settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=interleavings(depth=2))
def test_no_write_lands_after_completion_on_s3(s3, alice, settings, monkeypatch, ops):
    """The property of tests/security/test_tus_interleavings.py, on S3 (an upload under one part)."""
    from attachments.uploads.services import tus as service
    from tests.security.test_tus_interleavings import Run, assert_settled

    settings.AIRLOCK_RATE_LIMITS = settings.AIRLOCK_RATE_LIMITS.replace(
        intents_per_minute=10**6, pending_per_subject=10**6
    )
    note(repr(ops))
    run = Run(alice)
    monkeypatch.setattr(service, "object_arrived", run.on_arrival)
    run.run(ops)
    assert_settled(run)


def test_a_complete_upload_takes_no_more_bytes_so_its_key_is_sealed(s3, alice, api):
    """The premise of reading a tus upload in place: once complete, no PATCH (at any offset) writes the key."""
    client = api(alice)
    data = mp4_bytes(6 * MIB)
    path = _create(client, len(data))
    assert _patch(client, path, data, 0).status_code == 204
    row = Attachment.objects.get(pk=path.rsplit("/", 1)[1])
    assert row.upload_sealed and TusUpload.objects.get(pk=row.pk).state == "complete"
    etag = s3.client.head_object(Bucket=s3.bucket, Key=row.storage_key)["ETag"]

    more = _patch(client, path, b"x" * MIB, len(data))
    assert more.status_code == 413 and more.json()["error"]["code"] == "TOO_LARGE"
    again = _patch(client, path, b"x" * len(data), 0)
    assert again.status_code == 409 and again.json()["error"]["code"] == "OFFSET_MISMATCH"
    assert s3.get(row.storage_key) == data
    assert s3.client.head_object(Bucket=s3.bucket, Key=row.storage_key)["ETag"] == etag
    assert _multipart_uploads(s3) == []  # no new upload id was started for the key either
