"""Variants are bounded work: a per-process limit and the tenant's fair-share slot, 503 VARIANT_BUSY when full.

Each test starts a second request from inside the first one's sandbox render (the same
thread, so the same database view on SQLite and PostgreSQL): it arrives exactly while the
first holds its place in the process and its tenant's slot. With Redis (real mode) the
tenant's slots are the shared Redis pools the pipeline uses.
"""

from __future__ import annotations

import pytest

from attachments import hooks
from attachments.models import Derivative, VariantClaim
from attachments.variants.services import obtain as variant_service
from processing import tenant_slots
from tests.support import jpeg_bytes, run_pipeline, upload

pytestmark = pytest.mark.django_db

WEBP_ACCEPT = "image/avif,image/webp,image/apng,image/*,*/*;q=0.8"


def _ready(api, user) -> str:
    attachment_id = upload(api(user), jpeg_bytes(size=(800, 600)))
    assert run_pipeline(attachment_id) == "ready"
    return attachment_id


def _url(attachment_id: str, name: str = "small") -> str:
    return f"/api/v1/attachments/{attachment_id}/variants/{name}"


def _while_rendering(monkeypatch, during):
    """Run `during()` once, inside the first render (the sandbox still runs for the real file)."""
    real, seen, started = hooks.variant_renderer(), [], []

    def render(source, work_dir, size, fmt, page=0):
        if not started:  # the renders of the requests `during` makes render plainly
            started.append(True)
            seen.append(during())
        return real(source, work_dir, size, fmt)

    monkeypatch.setattr(hooks, "_variant_renderer", [render])
    return seen


def _assert_busy(response, limit: str) -> None:
    assert response.status_code == 503, response.content
    error = response.json()["error"]
    assert error["code"] == "VARIANT_BUSY" and error["details"] == {"limit": limit}
    assert int(response["Retry-After"]) >= 1


def test_the_process_limit_refuses_with_503_and_retry_after_and_leaves_no_claim(
    alice, mallory, api, settings, monkeypatch
):
    settings.AIRLOCK_CONCURRENCY = settings.AIRLOCK_CONCURRENCY.replace(variant=1)
    first, second, elsewhere = _ready(api, alice), _ready(api, alice), _ready(api, mallory)
    busy = variant_service.GENERATIONS.labels(outcome="busy")
    before = busy._value.get()
    seen = _while_rendering(
        monkeypatch,
        lambda: (
            api(alice).get(_url(second), HTTP_ACCEPT=WEBP_ACCEPT),
            api(mallory).get(_url(elsewhere), HTTP_ACCEPT=WEBP_ACCEPT),  # the process limit is everyone's
            VariantClaim.objects.filter(attachment_id=second).exists(),
        ),
    )
    assert api(alice).get(_url(first), HTTP_ACCEPT=WEBP_ACCEPT).status_code == 200
    refused, refused_elsewhere, claim_left = seen[0]
    _assert_busy(refused, "process")
    _assert_busy(refused_elsewhere, "process")
    assert claim_left is False  # refused before any work: nothing stuck for the retry
    assert busy._value.get() == before + 2
    # The browser's retry, once the place is free, is made and kept (single flight as before).
    assert api(alice).get(_url(second), HTTP_ACCEPT=WEBP_ACCEPT).status_code == 200
    assert Derivative.objects.filter(attachment_id=second, kind="variant:small:webp").count() == 1
    assert not VariantClaim.objects.exists()


def test_a_tenant_at_its_share_is_refused_while_another_tenants_variant_is_made(
    alice, mallory, api, settings, monkeypatch
):
    settings.AIRLOCK_CONCURRENCY = settings.AIRLOCK_CONCURRENCY.replace(variant=4, tenant=1)
    first, second, elsewhere = _ready(api, alice), _ready(api, alice), _ready(api, mallory)
    seen = _while_rendering(
        monkeypatch,
        lambda: (
            api(alice).get(_url(second, "medium"), HTTP_ACCEPT=WEBP_ACCEPT),
            api(mallory).get(_url(elsewhere), HTTP_ACCEPT=WEBP_ACCEPT),
            VariantClaim.objects.filter(attachment_id=second).exists(),
        ),
    )
    assert api(alice).get(_url(first), HTTP_ACCEPT=WEBP_ACCEPT).status_code == 200
    refused, other_tenant, claim_left = seen[0]
    _assert_busy(refused, "tenant")
    assert other_tenant.status_code == 200 and other_tenant["Content-Type"] == "image/webp"
    assert claim_left is False
    assert api(alice).get(_url(second, "medium"), HTTP_ACCEPT=WEBP_ACCEPT).status_code == 200


def test_the_tenants_pipeline_jobs_and_its_variants_share_one_pool(alice, mallory, api, settings):
    """Slots held by the tenant's running jobs leave its viewers none; another tenant is not touched."""
    settings.AIRLOCK_CONCURRENCY = settings.AIRLOCK_CONCURRENCY.replace(tenant=2)
    mine, elsewhere = _ready(api, alice), _ready(api, mallory)
    slots, tenant = tenant_slots.backend(), str(alice.membership.tenant_id)
    holders = [f"job-{n}" for n in range(2)]
    for holder in holders:  # two of acme's jobs running, as run_in_slot holds them
        assert slots.acquire(tenant, holder, limit=2, ttl_ms=60_000, stage=tenant_slots.DERIVE)
    try:
        _assert_busy(api(alice).get(_url(mine), HTTP_ACCEPT=WEBP_ACCEPT), "tenant")
        assert api(mallory).get(_url(elsewhere), HTTP_ACCEPT=WEBP_ACCEPT).status_code == 200
    finally:
        for holder in holders:
            slots.release(tenant, holder, stage=tenant_slots.DERIVE)
    assert api(alice).get(_url(mine), HTTP_ACCEPT=WEBP_ACCEPT).status_code == 200
    assert slots.holders_of(tenant, f"variant-{mine}") == []  # the variant's slot went back with its answer


def test_concurrent_requests_for_one_variant_still_make_it_once_under_the_limits(alice, api, settings, monkeypatch):
    """Single flight first: a request waiting on another's claim takes no place and no slot."""
    settings.AIRLOCK_CONCURRENCY = settings.AIRLOCK_CONCURRENCY.replace(variant=1, tenant=1)
    monkeypatch.setattr(variant_service, "WAIT_SECONDS", 0.3)
    attachment_id = _ready(api, alice)
    seen = _while_rendering(monkeypatch, lambda: api(alice).get(_url(attachment_id), HTTP_ACCEPT=WEBP_ACCEPT))
    assert api(alice).get(_url(attachment_id), HTTP_ACCEPT=WEBP_ACCEPT).status_code == 200
    waiter = seen[0]  # it found the maker's claim and waited for it, as before: not refused as busy
    assert waiter.status_code == 503 and waiter.json()["error"]["code"] == "UNAVAILABLE"
