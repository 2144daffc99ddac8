"""Quotas: what counts, when it stops counting, the 413, the usage endpoint, overrides.

Every test ends by checking the tenant's counter against a recount of its rows
(`usage_recounted`): the counter is kept by the services, the recount is the
definition, and they must agree after every state change.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from attachments.models import Attachment, Tenant, TenantUsage
from attachments.services.quotas import usage_recounted
from tests.support import EICAR, create_intent, jpeg_bytes, put_bytes, run_pipeline, upload


def usage(client) -> dict:
    response = client.get("/api/v1/usage")
    assert response.status_code == 200, response.content
    return response.json()


def counter(slug: str = "acme") -> tuple[int, int]:
    row = TenantUsage.objects.get(tenant__slug=slug)
    return row.bytes_used, row.files_used


def assert_consistent(slug: str = "acme") -> tuple[int, int]:
    tenant = Tenant.objects.get(slug=slug)
    assert counter(slug) == usage_recounted(tenant.pk)
    return counter(slug)


def test_usage_unlimited_by_default(alice, api):
    client = api(alice)
    assert usage(client) == {"bytes_used": 0, "bytes_limit": None, "files_used": 0, "files_limit": None}
    assert create_intent(client, size=1234).status_code == 201
    assert create_intent(client, size=66).status_code == 201
    assert usage(client) == {"bytes_used": 1300, "bytes_limit": None, "files_used": 2, "files_limit": None}
    assert_consistent()


def test_usage_needs_credentials(api):
    response = api().get("/api/v1/usage")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "NOT_AUTHENTICATED"


def test_usage_is_per_tenant(alice, bob, mallory, api):
    assert create_intent(api(alice), size=500).status_code == 201
    assert create_intent(api(bob), size=300).status_code == 201
    assert create_intent(api(mallory), size=7).status_code == 201
    assert usage(api(bob))["bytes_used"] == 800  # alice and bob share acme
    assert usage(api(mallory)) == {"bytes_used": 7, "bytes_limit": None, "files_used": 1, "files_limit": None}


def test_bytes_quota_refuses_with_details_and_creates_nothing(alice, api, settings):
    settings.AIRLOCK_TENANT_QUOTA = settings.AIRLOCK_TENANT_QUOTA.replace(bytes=1000)
    client = api(alice)
    assert create_intent(client, size=600).status_code == 201
    assert create_intent(client, size=400).status_code == 201  # exactly full is allowed
    before = Attachment.objects.count()
    refused = create_intent(client, size=1)
    assert refused.status_code == 413
    assert refused.json()["error"]["code"] == "QUOTA_EXCEEDED"
    assert refused.json()["error"]["details"] == {"quota": "bytes", "used": 1000, "limit": 1000, "requested": 1}
    assert Attachment.objects.count() == before
    assert usage(client) == {"bytes_used": 1000, "bytes_limit": 1000, "files_used": 2, "files_limit": None}
    assert_consistent()


def test_files_quota_refuses(alice, api, settings):
    settings.AIRLOCK_TENANT_QUOTA = settings.AIRLOCK_TENANT_QUOTA.replace(files=2)
    client = api(alice)
    assert create_intent(client).status_code == 201
    assert create_intent(client).status_code == 201
    refused = create_intent(client, size=10)
    assert refused.status_code == 413
    assert refused.json()["error"]["details"] == {"quota": "files", "used": 2, "limit": 2, "requested": 1}
    assert usage(client)["files_limit"] == 2


def test_tenant_override_beats_the_default_and_stays_per_tenant(alice, mallory, api, settings):
    settings.AIRLOCK_TENANT_QUOTA = settings.AIRLOCK_TENANT_QUOTA.replace(bytes=100)
    Tenant.objects.filter(slug="acme").update(quota_bytes=5000, quota_files=1)
    assert create_intent(api(alice), size=4000).status_code == 201  # over the default, under the override
    refused = create_intent(api(alice), size=10)
    assert refused.json()["error"]["details"]["quota"] == "files"
    assert create_intent(api(mallory), size=101).json()["error"]["details"] == {
        "quota": "bytes",
        "used": 0,
        "limit": 100,
        "requested": 101,
    }
    assert usage(api(alice)) == {"bytes_used": 4000, "bytes_limit": 5000, "files_used": 1, "files_limit": 1}
    assert usage(api(mallory))["bytes_limit"] == 100


def test_a_lowered_quota_refuses_until_room_is_freed(alice, api):
    client = api(alice)
    ids = [create_intent(client, size=300).json()["id"] for _ in range(3)]
    Tenant.objects.filter(slug="acme").update(quota_bytes=500)
    assert create_intent(client, size=1).json()["error"]["details"]["used"] == 900
    for attachment_id in ids[:2]:
        assert client.post(f"/api/v1/attachments/{attachment_id}/discard").status_code == 204
    assert create_intent(client, size=200).status_code == 201
    assert_consistent()


def test_reservation_is_replaced_by_the_stored_size(alice, api):
    client = api(alice)
    data = jpeg_bytes()
    intent = create_intent(client, size=len(data))
    assert usage(client)["bytes_used"] == len(data)
    assert put_bytes(intent.json()["upload"]["url"], data, content_type="image/jpeg").status_code == 202
    assert run_pipeline(intent.json()["id"]) == "ready"
    assert usage(client) == {"bytes_used": len(data), "bytes_limit": None, "files_used": 1, "files_limit": None}
    assert_consistent()


def test_a_body_shorter_than_declared_is_rejected_and_stops_counting(alice, api):
    client = api(alice)
    data = jpeg_bytes()
    intent = create_intent(client, size=len(data) + 5000)  # declared more than it sends
    assert usage(client)["bytes_used"] == len(data) + 5000
    assert put_bytes(intent.json()["upload"]["url"], data, content_type="image/jpeg").status_code == 202
    assert usage(client)["bytes_used"] == len(data) + 5000  # still reserved until intake measures it
    assert run_pipeline(intent.json()["id"]) == "rejected"
    assert client.get(f"/api/v1/attachments/{intent.json()['id']}").json()["reason"]["code"] == "size_mismatch"
    assert usage(client) == {"bytes_used": 0, "bytes_limit": None, "files_used": 0, "files_limit": None}
    assert_consistent()


def test_rejected_file_stops_counting(alice, api):
    client = api(alice)
    kept = upload(client, jpeg_bytes())
    assert run_pipeline(kept) == "ready"
    bad = upload(client, EICAR, profile="document", filename="e.pdf", content_type="application/pdf")
    assert usage(client)["files_used"] == 2
    assert run_pipeline(bad) == "rejected"
    assert usage(client)["files_used"] == 1
    assert usage(client)["bytes_used"] == Attachment.objects.get(pk=kept).stored_size
    assert_consistent()


def test_failed_file_stops_counting_and_a_requeue_counts_it_again(alice, api, settings):
    from attachments.services.moderation import attachment_requeue
    from attachments.services.processing import attachment_begin, attachment_retry_or_fail

    settings.AIRLOCK_RETRIES = settings.AIRLOCK_RETRIES.replace(max_attempts=1)
    client = api(alice)
    data = jpeg_bytes()
    attachment_id = upload(client, data)
    pk = Attachment.objects.get(pk=attachment_id).pk
    token = attachment_begin(attachment_id=pk)
    assert attachment_retry_or_fail(attachment_id=pk, token=token, error="clamd down") == "failed"
    assert usage(client)["files_used"] == 0 and usage(client)["bytes_used"] == 0
    assert_consistent()
    attachment_requeue(attachment_id=attachment_id, actor="staff:test")
    assert usage(client)["files_used"] == 1
    assert run_pipeline(attachment_id) == "ready"
    assert usage(client)["bytes_used"] == len(data)
    assert_consistent()


def test_taken_down_file_stops_counting_and_a_restore_counts_it_again(alice, api):
    from attachments.services.moderation import attachment_restore, attachment_take_down

    client = api(alice)
    data = jpeg_bytes()
    attachment_id = upload(client, data)
    assert run_pipeline(attachment_id) == "ready"
    attachment_take_down(attachment_id=attachment_id, actor="mod", note="nope")
    assert usage(client)["files_used"] == 0
    attachment_restore(attachment_id=attachment_id, actor="mod")
    assert usage(client) == {"bytes_used": len(data), "bytes_limit": None, "files_used": 1, "files_limit": None}
    assert_consistent()


def test_discarded_files_stop_counting_at_once(alice, api):
    client = api(alice)
    one = create_intent(client, size=100).json()["id"]
    ready = upload(client, jpeg_bytes())
    assert run_pipeline(ready) == "ready"
    assert client.post(f"/api/v1/attachments/{one}/discard").status_code == 204
    assert usage(client)["files_used"] == 1
    assert client.post(f"/api/v1/attachments/{one}/discard").status_code == 204  # idempotent: no double release
    assert usage(client)["files_used"] == 1
    create_intent(client, size=50)
    assert client.post("/api/v1/attachments/discard-all").status_code in (200, 204)
    assert usage(client) == {"bytes_used": 0, "bytes_limit": None, "files_used": 0, "files_limit": None}
    assert_consistent()


def test_committed_file_keeps_counting(alice, api):
    client = api(alice)
    data = jpeg_bytes()
    attachment_id = upload(client, data)
    assert run_pipeline(attachment_id) == "ready"
    assert (
        client.post("/api/v1/attachments/commit", {"ids": [attachment_id], "ref": "post:1"}, format="json").status_code
        == 200
    )
    assert client.post("/api/v1/attachments/discard-all").status_code in (200, 204)
    assert usage(client)["bytes_used"] == len(data)
    assert_consistent()


def test_replaced_avatar_stops_counting(alice, api):
    client = api(alice)
    first = upload(client, jpeg_bytes(color=(1, 2, 3)), profile="avatar")
    second = upload(client, jpeg_bytes(size=(80, 60)), profile="avatar")
    for attachment_id in (first, second):
        assert run_pipeline(attachment_id) == "ready"
        assert (
            client.post(
                "/api/v1/attachments/commit", {"ids": [attachment_id], "ref": "profile:alice"}, format="json"
            ).status_code
            == 200
        )
    assert Attachment.objects.get(pk=first).lifecycle == "discarded"
    assert usage(client)["files_used"] == 1
    assert usage(client)["bytes_used"] == Attachment.objects.get(pk=second).stored_size
    assert_consistent()


def test_swept_files_stop_counting(alice, api):
    from sweeper.locks import NoLock
    from sweeper.sweep import sweep_expired

    client = api(alice)
    expired = create_intent(client, size=100).json()["id"]
    kept = create_intent(client, size=7).json()["id"]
    Attachment.objects.filter(pk=expired).update(expires_at=timezone.now() - timedelta(seconds=5))
    assert usage(client)["files_used"] == 2  # expired but not yet deleted: still held
    sweep_expired(lock=NoLock())
    assert Attachment.objects.get(pk=expired).lifecycle == "deleted"
    assert Attachment.objects.get(pk=kept).lifecycle == "staged"
    assert usage(client) == {"bytes_used": 7, "bytes_limit": None, "files_used": 1, "files_limit": None}
    assert_consistent()


def test_upload_through_reserves_and_a_refused_body_gives_it_back(alice, api, settings):
    from django.core.files.uploadedfile import SimpleUploadedFile

    client = api(alice)
    data = jpeg_bytes()
    ok = client.post("/api/v1/attachments", {"profile": "image", "file": SimpleUploadedFile("a.jpg", data)})
    assert ok.status_code == 202
    assert usage(client) == {"bytes_used": len(data), "bytes_limit": None, "files_used": 1, "files_limit": None}
    settings.AIRLOCK_TENANT_QUOTA = settings.AIRLOCK_TENANT_QUOTA.replace(bytes=len(data) + 10)
    refused = client.post("/api/v1/attachments", {"profile": "image", "file": SimpleUploadedFile("b.jpg", data)})
    assert refused.status_code == 413 and refused.json()["error"]["code"] == "QUOTA_EXCEEDED"
    assert refused.json()["error"]["details"]["requested"] == len(data)
    settings.AIRLOCK_TENANT_QUOTA = settings.AIRLOCK_TENANT_QUOTA.replace(bytes=None)
    # the body passes the cap while it streams
    settings.AIRLOCK_MAX_BYTES = settings.AIRLOCK_MAX_BYTES.replace(upload_through=len(data) - 1)
    too_big = client.post("/api/v1/attachments", {"profile": "image", "file": SimpleUploadedFile("c.jpg", data)})
    assert too_big.status_code == 413 and too_big.json()["error"]["code"] == "TOO_LARGE"
    assert usage(client)["files_used"] == 1
    assert_consistent()


def test_a_tenant_from_before_quotas_is_counted_on_first_use(alice, api):
    client = api(alice)
    create_intent(client, size=40)
    create_intent(client, size=2)
    TenantUsage.objects.all().delete()  # as if the tenant predated the counter
    assert usage(client)["bytes_used"] == 42
    TenantUsage.objects.all().delete()
    assert create_intent(client, size=8).status_code == 201
    assert assert_consistent() == (50, 3)
    TenantUsage.objects.all().delete()
    assert client.post(f"/api/v1/attachments/{Attachment.objects.first().pk}/discard").status_code == 204
    assert assert_consistent()[1] == 2


@pytest.mark.parametrize("recount_drift", [(5, 1), (-5, 0)])
def test_recount_repairs_a_drifted_counter(alice, api, recount_drift):
    from attachments.services.quotas import tenant_usage_recount

    client = api(alice)
    create_intent(client, size=40)
    tenant = Tenant.objects.get(slug="acme")
    TenantUsage.objects.filter(tenant=tenant).update(bytes_used=40 + recount_drift[0], files_used=1 + recount_drift[1])
    before, after = tenant_usage_recount(tenant_id=tenant.pk)
    assert before == (40 + recount_drift[0], 1 + recount_drift[1]) and after == (40, 1)
    assert_consistent()


def _samples(text: str) -> dict[tuple[str, str], float]:
    from prometheus_client.parser import text_string_to_metric_families

    return {
        (s.name, s.labels.get("tenant", "")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("airlock_tenant_")
    }


def test_usage_per_tenant_in_metrics(alice, mallory, api, client, settings):
    # opt-in (tests/ops/test_metrics.py)
    settings.AIRLOCK_METRICS = settings.AIRLOCK_METRICS.replace(tenant_labels=True)
    settings.AIRLOCK_TENANT_QUOTA = settings.AIRLOCK_TENANT_QUOTA.replace(files=10)
    Tenant.objects.filter(slug="evil").update(quota_bytes=999)
    create_intent(api(alice), size=321)
    create_intent(api(alice), size=1)
    create_intent(api(mallory), size=5)
    response = client.get("/metrics")
    assert response.status_code == 200
    samples = _samples(response.content.decode())
    assert samples[("airlock_tenant_bytes_used", "acme")] == 322
    assert samples[("airlock_tenant_files_used", "acme")] == 2
    assert samples[("airlock_tenant_bytes_used", "evil")] == 5
    assert samples[("airlock_tenant_files_limit", "acme")] == 10
    assert samples[("airlock_tenant_bytes_limit", "evil")] == 999
    assert ("airlock_tenant_bytes_limit", "acme") not in samples  # unlimited: no series


def test_recount_usage_command_repairs_and_reports(alice, mallory, api):
    import io

    from django.core.management import call_command

    create_intent(api(alice), size=40)
    create_intent(api(mallory), size=9)
    TenantUsage.objects.filter(tenant__slug="acme").update(bytes_used=1, files_used=7)
    out = io.StringIO()
    call_command("recount_usage", stdout=out)
    assert out.getvalue().splitlines() == ["acme: bytes 1 -> 40, files 7 -> 1", "1 of 2 tenants recounted"]
    assert assert_consistent() == (40, 1)
    out = io.StringIO()
    call_command("recount_usage", "--tenant", "evil", stdout=out)
    assert out.getvalue().splitlines() == ["0 of 1 tenants recounted"]


def test_tus_creation_reserves_and_is_refused_over_quota(alice, api, settings):
    from tests.api.test_tus import TUS, _create

    client = api(alice)
    assert _create(client, 700).status_code == 201
    assert usage(client) == {"bytes_used": 700, "bytes_limit": None, "files_used": 1, "files_limit": None}
    settings.AIRLOCK_TENANT_QUOTA = settings.AIRLOCK_TENANT_QUOTA.replace(bytes=1000)
    refused = _create(client, 301)
    assert refused.status_code == 413
    assert refused.json()["error"]["details"] == {"quota": "bytes", "used": 700, "limit": 1000, "requested": 301}
    created = _create(client, 300)
    assert created.status_code == 201
    # Terminating a tus upload discards it: its room comes back at once.
    assert client.delete(created["Location"], **TUS).status_code == 204
    assert usage(client)["bytes_used"] == 700
    assert_consistent()
