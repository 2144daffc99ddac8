"""Variants on the S3 backend: made on request (a 302 to the bucket), deleted from the bucket on takedown,
and a variant row whose object is gone dropped by reconcile."""

from __future__ import annotations

import pytest

from attachments.models import Derivative
from attachments.services.moderation import attachment_take_down
from sweeper.reconcile import reconcile_storage
from tests.s3.support import ready_jpeg

pytestmark = [pytest.mark.s3, pytest.mark.django_db]

WEBP_ACCEPT = "image/avif,image/webp,image/apng,image/*,*/*;q=0.8"


def _in_bucket(s3, key: str) -> bool:
    return s3.client.list_objects_v2(Bucket=s3.bucket, Prefix=key).get("KeyCount", 0) > 0


def _make(s3, api, alice, attachment_id, name: str) -> str:
    got = api(alice).get(f"/api/v1/attachments/{attachment_id}/variants/{name}", HTTP_ACCEPT=WEBP_ACCEPT)
    assert got.status_code == 302 and got["Location"].startswith(f"{s3.endpoint}/{s3.bucket}/")
    return Derivative.objects.get(attachment_id=attachment_id, kind=f"variant:{name}:webp").storage_key


def test_a_takedown_deletes_the_variants_from_the_bucket(
    s3, alice, api, events_token, django_capture_on_commit_callbacks
):
    attachment_id = ready_jpeg(s3, api(alice), events_token, size=(1600, 1200))
    keys = [_make(s3, api, alice, attachment_id, name) for name in ("small", "medium")]
    assert all(_in_bucket(s3, key) for key in keys)
    with django_capture_on_commit_callbacks(execute=True):
        attachment_take_down(attachment_id=attachment_id, actor="staff:mod", note="abuse")
    assert not any(_in_bucket(s3, key) for key in keys)
    assert not Derivative.objects.filter(attachment_id=attachment_id, kind__startswith="variant:").exists()


def test_reconcile_drops_a_variant_row_whose_object_left_the_bucket(s3, alice, api, events_token):
    attachment_id = ready_jpeg(s3, api(alice), events_token, size=(1600, 1200))
    key = _make(s3, api, alice, attachment_id, "small")
    s3.client.delete_object(Bucket=s3.bucket, Key=key)
    report = reconcile_storage()
    assert [(f.kind, f.key, f.action) for f in report.findings] == [("missing_variant", key, "dropped")]
    assert not Derivative.objects.filter(storage_key=key).exists()
    assert _make(s3, api, alice, attachment_id, "small") == key  # made again on the next request
    assert _in_bucket(s3, key)
