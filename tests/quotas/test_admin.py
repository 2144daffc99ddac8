"""The admin's tenant list and page: usage against quotas, and per-tenant overrides that take effect."""

from __future__ import annotations

import re

from django.contrib.auth import get_user_model
from django.test import Client

from attachments.models import Tenant
from tests.support import create_intent


def _superuser() -> Client:
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-root")
    client = Client()
    client.force_login(user)
    return client


def _text(response) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", response.content.decode()))


def test_tenant_list_shows_usage_against_quotas(alice, mallory, api, settings, django_assert_max_num_queries):
    settings.AIRLOCK_TENANT_QUOTA = settings.AIRLOCK_TENANT_QUOTA.replace(files=4)
    Tenant.objects.filter(slug="evil").update(quota_bytes=2048)
    create_intent(api(alice), size=1536)
    create_intent(api(alice), size=512)
    create_intent(api(mallory), size=1024)
    admin = _superuser()
    with django_assert_max_num_queries(8):  # the counters come with the tenants: no query per row
        response = admin.get("/admin/attachments/tenant/")
    assert response.status_code == 200
    text = _text(response)
    assert "2.0 KB (unlimited)" in text  # acme: bytes unlimited
    assert "2 of 4 (50 %)" in text  # acme files, the global quota
    assert "1.0 KB of 2.0 KB (50 %)" in text  # evil: its own byte quota
    assert "1 of 4 (25 %)" in text


def test_override_set_in_the_admin_refuses_the_next_intent(alice, api):
    create_intent(api(alice), size=600)
    acme = Tenant.objects.get(slug="acme")
    admin = _superuser()
    page = admin.get(f"/admin/attachments/tenant/{acme.pk}/change/")
    assert page.status_code == 200 and "600 bytes (unlimited)" in _text(page)
    saved = admin.post(
        f"/admin/attachments/tenant/{acme.pk}/change/",
        {"slug": "acme", "name": "acme", "quota_bytes": "1000", "quota_files": ""},
    )
    assert saved.status_code == 302, _text(saved)[:2000]
    refused = create_intent(api(alice), size=401)
    assert refused.status_code == 413
    assert refused.json()["error"]["details"] == {"quota": "bytes", "used": 600, "limit": 1000, "requested": 401}
    assert create_intent(api(alice), size=400).status_code == 201
    assert "1000 bytes of 1000 bytes (100 %)" in _text(admin.get(f"/admin/attachments/tenant/{acme.pk}/change/"))
