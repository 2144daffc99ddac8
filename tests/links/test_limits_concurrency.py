"""Per-guest and per-link limits hold when a guest's intents arrive at once (real PostgreSQL, threads)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from attachments.links.services.upload_links import link_guest_open, upload_link_create
from attachments.models import Attachment, LinkGuest, UploadLink

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _intents(key: str, n: int) -> list[int]:
    def one(i: int) -> int:
        try:
            api = APIClient()
            api.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
            return api.post(
                "/api/v1/uploads",
                {"profile": "camera", "filename": f"{i}.png", "size": 1000, "content_type": "image/png"},
                format="json",
            ).status_code
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(one, range(n)))


def test_twenty_concurrent_intents_of_one_guest_with_five_allowed(alice, settings):
    settings.AIRLOCK_RATE_LIMITS = settings.AIRLOCK_RATE_LIMITS.replace(intents_per_minute=10_000)
    link = upload_link_create(
        user=alice, ref="event:c", expires_at=timezone.now() + timedelta(days=1), max_files_per_guest=5
    )
    key = link_guest_open(link=link, device_id="device-one-abcdef").key
    codes = _intents(key, 20)
    assert sorted(codes) == [201] * 5 + [413] * 15
    assert Attachment.objects.filter(upload_link=link).count() == 5
    guest = LinkGuest.objects.get(link=link)
    assert (guest.files_used, guest.bytes_used) == (5, 5000)
    assert UploadLink.objects.get(pk=link.pk).files_used == 5


def test_concurrent_guests_share_the_links_limit(alice, settings):
    settings.AIRLOCK_RATE_LIMITS = settings.AIRLOCK_RATE_LIMITS.replace(intents_per_minute=10_000)
    link = upload_link_create(user=alice, ref="event:d", expires_at=timezone.now() + timedelta(days=1), max_files=7)
    keys = [link_guest_open(link=link, device_id=f"device-{i}-abcdef").key for i in range(4)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        codes = [c for batch in pool.map(lambda k: _intents(k, 4), keys) for c in batch]
    assert codes.count(201) == 7 and codes.count(413) == 9
    assert Attachment.objects.filter(upload_link=link).count() == 7 == UploadLink.objects.get(pk=link.pk).files_used
