"""Stored size against declared size: any difference is rejected/size_mismatch, and usage never passes the quota.

The local backend's own PUT refuses a larger body while it streams (413); a
store that cannot bound a body (an S3 PUT, a stand-in ignoring POST policies:
tests/s3/test_integrity.py) lets it land, and intake catches it. Here the
object is written straight into storage, as such a store would, and announced
the way every path announces it (object_arrived).
"""

from __future__ import annotations

import pytest

from attachments.models import Attachment, Tenant, TenantUsage
from attachments.services.quotas import usage_recounted
from attachments.storage import get_gateway
from tests.support import create_intent, jpeg_bytes, land_unchecked, put_bytes, run_pipeline

pytestmark = pytest.mark.django_db


def _counter(tenant_id) -> tuple[int, int]:
    row = TenantUsage.objects.get(tenant_id=tenant_id)
    return row.bytes_used, row.files_used


def test_declared_small_stored_large_is_rejected_and_never_counts_past_the_quota(alice, api):
    client = api(alice)
    data = jpeg_bytes((800, 600))
    declared = 1024
    assert len(data) > 4 * declared
    Tenant.objects.filter(slug="acme").update(quota_bytes=declared)
    created = create_intent(client, size=declared)
    assert created.status_code == 201, created.content
    row = Attachment.objects.get(pk=created.json()["id"])
    assert _counter(row.tenant_id) == (declared, 1)

    land_unchecked(row, data)
    assert run_pipeline(row.pk) == "rejected"
    row.refresh_from_db()
    assert row.reason_code == "size_mismatch"
    assert str(len(data)) in row.reason_message and str(declared) in row.reason_message
    # Quarantined like any rejection: out of the upload key, never stored_size.
    assert get_gateway().head(row.storage_key) is None
    assert get_gateway().head(row.quarantine_key) is not None
    assert row.stored_size is None
    assert _counter(row.tenant_id) == (0, 0) == usage_recounted(row.tenant_id)
    resource = client.get(f"/api/v1/attachments/{row.pk}").json()
    assert resource["status"] == "rejected" and resource["reason"]["code"] == "size_mismatch"


def test_declared_large_stored_small_is_rejected(alice, api):
    client = api(alice)
    data = jpeg_bytes()
    created = create_intent(client, size=len(data) + 1)
    assert put_bytes(created.json()["upload"]["url"], data, content_type="image/jpeg").status_code == 202
    assert run_pipeline(created.json()["id"]) == "rejected"
    row = Attachment.objects.get(pk=created.json()["id"])
    assert row.reason_code == "size_mismatch"
    assert _counter(row.tenant_id) == (0, 0) == usage_recounted(row.tenant_id)


def test_the_local_put_refuses_a_body_over_the_declared_size_and_keeps_nothing(alice, api):
    client = api(alice)
    data = jpeg_bytes((800, 600))
    created = create_intent(client, size=1024)
    assert put_bytes(created.json()["upload"]["url"], data, content_type="image/jpeg").status_code == 413
    row = Attachment.objects.get(pk=created.json()["id"])
    assert get_gateway().head(row.storage_key) is None and row.uploaded_at is None
    assert _counter(row.tenant_id) == (1024, 1)


def test_a_tus_upload_is_compared_with_its_upload_length(alice, api):
    from attachments.uploads.services.intents import upload_intent_create

    # The tus path creates its row through the same intent service (presign=False);
    # whatever writes the object, intake compares it with Upload-Length.
    intent = upload_intent_create(
        user=alice, profile_name="image", filename="t.jpg", size=100, content_type="image/jpeg", presign=False
    )
    land_unchecked(intent.attachment, jpeg_bytes())
    assert run_pipeline(intent.attachment.pk) == "rejected"
    assert Attachment.objects.get(pk=intent.attachment.pk).reason_code == "size_mismatch"


def test_matching_sizes_still_become_ready(alice, api):
    client = api(alice)
    data = jpeg_bytes()
    created = create_intent(client, size=len(data))
    assert put_bytes(created.json()["upload"]["url"], data, content_type="image/jpeg").status_code == 202
    assert run_pipeline(created.json()["id"]) == "ready"
    row = Attachment.objects.get(pk=created.json()["id"])
    assert row.stored_size == len(data) and _counter(row.tenant_id) == (len(data), 1)
