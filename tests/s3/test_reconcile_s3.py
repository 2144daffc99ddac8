"""Reconcile both ways on S3 (moto server): lost originals and derivatives, and orphan multipart uploads.

moto lists every multipart upload as initiated on 2010-11-10, so every upload
it holds is "old"; the fresh one is made fresh by giving its real initiation
time back through the gateway's listing (the one thing moto cannot say).
"""

from __future__ import annotations

import base64
import uuid

import pytest
from django.utils import timezone

from attachments.models import Attachment, Lifecycle, OutboxMessage, Status, TusUpload
from attachments.storage import get_gateway
from attachments.storage.base import MultipartUploadInfo
from attachments.storage.s3 import S3Gateway
from sweeper.control import sweeper_control_set
from sweeper.reconcile import reconcile_storage
from tests.s3.support import intent, mp4_bytes
from tests.sweeper.support import make_attachment

pytestmark = [pytest.mark.s3, pytest.mark.django_db]

MIB = 1 << 20
TUS = {"HTTP_TUS_RESUMABLE": "1.0.0"}


def _in_progress(s3) -> set[str]:
    return {u["UploadId"] for u in s3.client.list_multipart_uploads(Bucket=s3.bucket).get("Uploads", [])}


def _tus_with_a_part(client) -> TusUpload:
    """A live tus upload that has sent one full part: S3 holds a multipart upload for it."""
    meta = ",".join(
        f"{k} {base64.b64encode(v.encode()).decode()}"
        for k, v in {"profile": "media", "filename": "clip.mp4", "content_type": "video/mp4"}.items()
    )
    data = mp4_bytes(12 * MIB)
    created = client.post("/api/v1/tus/", **TUS, HTTP_UPLOAD_LENGTH=str(len(data)), HTTP_UPLOAD_METADATA=meta)
    assert created.status_code == 201, created.content
    path = created["Location"].removeprefix("http://testserver")
    sent = client.generic(
        "PATCH", path, data[: 6 * MIB], content_type="application/offset+octet-stream", **TUS, HTTP_UPLOAD_OFFSET="0"
    )
    assert sent.status_code == 204, sent.content
    upload = TusUpload.objects.get(pk=path.rsplit("/", 1)[1])
    assert upload.s3_upload_id
    return upload


@pytest.fixture
def bucket_drift(s3, settings, alice, api, monkeypatch):
    """Rows with lost objects, and multipart uploads: orphan (old), fresh, live tus, live intent, dead intent."""
    from attachments.storage import reset_gateway

    settings.AIRLOCK_S3_MULTIPART = settings.AIRLOCK_S3_MULTIPART.replace(threshold_bytes=5 * MIB, part_bytes=5 * MIB)
    reset_gateway()
    gateway = get_gateway()
    lost = make_attachment(alice, lifecycle=Lifecycle.COMMITTED, created_at=timezone.now())
    thinned = make_attachment(alice, lifecycle=Lifecycle.COMMITTED, created_at=timezone.now())
    whole = make_attachment(alice, lifecycle=Lifecycle.COMMITTED, created_at=timezone.now())
    gateway.delete(lost.storage_key)
    gateway.delete(thinned.served_key)  # the served rendition is a derivative: made again, not failed

    def create(key: str) -> str:
        return s3.client.create_multipart_upload(Bucket=s3.bucket, Key=key)["UploadId"]

    orphan_key = f"tenants/acme/media/{uuid.uuid4()}"
    orphan = create(orphan_key)
    fresh = create(f"tenants/acme/media/{uuid.uuid4()}")
    elsewhere = create("elsewhere/not-ours")  # outside the upload prefix: not ours to judge
    tus = _tus_with_a_part(api(alice)).s3_upload_id
    live = Attachment.objects.get(
        pk=intent(api(alice), mp4_bytes(11 * MIB), profile="media", filename="clip.mp4", content_type="video/mp4")["id"]
    ).multipart_upload_id
    dead_row = Attachment.objects.get(
        pk=intent(api(alice), mp4_bytes(11 * MIB), profile="media", filename="clip.mp4", content_type="video/mp4")["id"]
    )
    # A committed intent that already ended (rejected) but whose abort never happened: nobody owns its parts.
    Attachment.objects.filter(pk=dead_row.pk).update(
        status=Status.REJECTED, reason_code="object_missing", lifecycle=Lifecycle.COMMITTED
    )
    dead = dead_row.multipart_upload_id
    assert {orphan, fresh, elsewhere, tus, live, dead} <= _in_progress(s3)

    listing = S3Gateway.list_multipart_uploads

    def with_fresh_one_dated_now(self, prefix):
        for upload in listing(self, prefix):
            yield (
                MultipartUploadInfo(upload.key, upload.upload_id, timezone.now())
                if upload.upload_id == fresh
                else upload
            )

    monkeypatch.setattr(S3Gateway, "list_multipart_uploads", with_fresh_one_dated_now)
    return {
        "lost": lost,
        "thinned": thinned,
        "whole": whole,
        "orphan": orphan,
        "orphan_key": orphan_key,
        "fresh": fresh,
        "elsewhere": elsewhere,
        "tus": tus,
        "live": live,
        "dead": dead,
    }


def _status(row: Attachment) -> tuple[str, str]:
    return tuple(Attachment.objects.filter(pk=row.pk).values_list("status", "reason_code").get())


def test_dry_run_lists_everything_and_changes_nothing(s3, bucket_drift):
    d = bucket_drift
    before = _in_progress(s3)

    report = reconcile_storage(dry_run=True)

    counts = report.counts()
    assert (counts["missing_originals"], counts["missing_derivatives"]) == (1, 1)
    assert (counts["orphan_multipart_found"], counts["orphan_multipart_aborted"]) == (2, 0)
    multipart = {
        f.detail.split(",")[0].removeprefix("upload "): f.action
        for f in report.findings
        if f.kind == "orphan_multipart"
    }
    assert multipart == {d["orphan"][:60]: "would_abort", d["dead"][:60]: "would_abort"}
    assert _in_progress(s3) == before
    assert [_status(d[n]) for n in ("lost", "thinned", "whole")] == [("ready", "")] * 3
    assert not OutboxMessage.objects.filter(actor_name="rederive").exists()


def test_a_real_run_fails_regenerates_and_aborts_exactly_the_right_things(s3, bucket_drift):
    d = bucket_drift

    report = reconcile_storage()

    counts = report.counts()
    assert counts["missing_originals_failed"] == 1 and counts["missing_derivatives_regenerated"] == 1
    assert counts["orphan_multipart_aborted"] == 2
    assert _status(d["lost"]) == ("failed", "object_missing")
    assert _status(d["thinned"]) == _status(d["whole"]) == ("ready", "")
    assert list(OutboxMessage.objects.filter(actor_name="rederive").values_list("args", flat=True)) == [
        [str(d["thinned"].pk)]
    ]
    left = _in_progress(s3)
    assert d["orphan"] not in left and d["dead"] not in left
    assert {d["fresh"], d["elsewhere"], d["tus"], d["live"]} <= left
    assert not report.errors


def test_the_killswitch_stops_every_abort_and_every_row_change(s3, bucket_drift):
    d = bucket_drift
    before = _in_progress(s3)
    sweeper_control_set(killswitch=True, actor="test")

    report = reconcile_storage()

    touched = {
        f.action for f in report.findings if f.kind in ("missing_original", "missing_derivative", "orphan_multipart")
    }
    assert touched == {"kept"}
    assert report.counts()["orphan_multipart_found"] == 2
    assert _in_progress(s3) == before
    assert _status(d["lost"]) == ("ready", "")
