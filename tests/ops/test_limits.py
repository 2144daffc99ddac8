"""Rate limits (intents per minute, outstanding pending uploads) and JSON body limits (413)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from django.utils import timezone

from attachments.models import Attachment, TenantUsage
from tests.support import client_for, create_intent, jpeg_bytes, put_bytes

# Mid-minute, so a test can never straddle two rate windows.
FROZEN = datetime(2026, 11, 30, 10, 0, 20, tzinfo=UTC)


@pytest.fixture
def frozen_now(monkeypatch):
    monkeypatch.setattr(timezone, "now", lambda: FROZEN)
    return FROZEN


def _assert_rate_limited(response, *, retry_after: int | None = None) -> dict:
    assert response.status_code == 429, response.content
    body = response.json()
    assert body["error"]["code"] == "RATE_LIMITED"
    assert int(response["Retry-After"]) >= 1
    if retry_after is not None:
        assert int(response["Retry-After"]) == retry_after
    return body


def test_intents_per_minute(alice, bob, settings, frozen_now):
    settings.AIRLOCK_RATE_LIMITS = settings.AIRLOCK_RATE_LIMITS.replace(intents_per_minute=3)
    client = client_for(alice)
    for _ in range(3):
        assert create_intent(client).status_code == 201
    body = _assert_rate_limited(create_intent(client), retry_after=40)  # 60 - 20 seconds into the minute
    assert body["error"]["details"]["limit"] == 3
    # Per user: bob is not slowed down by alice.
    assert create_intent(client_for(bob)).status_code == 201


def test_intent_rate_window_resets_next_minute(alice, settings, monkeypatch):
    settings.AIRLOCK_RATE_LIMITS = settings.AIRLOCK_RATE_LIMITS.replace(intents_per_minute=1)
    client = client_for(alice)
    monkeypatch.setattr(timezone, "now", lambda: FROZEN)
    assert create_intent(client).status_code == 201
    _assert_rate_limited(create_intent(client))
    monkeypatch.setattr(timezone, "now", lambda: FROZEN.replace(minute=1))
    assert create_intent(client).status_code == 201


def test_upload_through_counts_against_the_intent_rate(alice, settings, frozen_now):
    settings.AIRLOCK_RATE_LIMITS = settings.AIRLOCK_RATE_LIMITS.replace(intents_per_minute=1)
    client = client_for(alice)
    assert create_intent(client).status_code == 201
    from django.core.files.uploadedfile import SimpleUploadedFile

    response = client.post(
        "/api/v1/attachments",
        {"profile": "image", "file": SimpleUploadedFile("a.jpg", jpeg_bytes(), "image/jpeg")},
        format="multipart",
    )
    _assert_rate_limited(response)


def test_outstanding_pending_uploads_cap(alice, settings, frozen_now):
    settings.AIRLOCK_RATE_LIMITS = settings.AIRLOCK_RATE_LIMITS.replace(pending_per_subject=2)
    client = client_for(alice)
    data = jpeg_bytes()
    first = create_intent(client, size=len(data)).json()
    second = create_intent(client, size=len(data)).json()
    usage = TenantUsage.objects.get(tenant=alice.membership.tenant)
    body = _assert_rate_limited(create_intent(client, size=len(data)), retry_after=60)
    assert body["error"]["details"]["limit"] == 2
    # Refused at the cap: no row, and the tenant's counter took no room for it.
    assert Attachment.objects.filter(owner=alice).count() == 2
    after = TenantUsage.objects.get(tenant=alice.membership.tenant)
    assert (after.files_used, after.bytes_used) == (usage.files_used, usage.bytes_used)
    # Bytes arriving make an intent no longer outstanding…
    assert put_bytes(first["upload"]["url"], data).status_code == 202
    assert create_intent(client, size=len(data)).status_code == 201
    _assert_rate_limited(create_intent(client, size=len(data)))
    # …and so does discarding it.
    assert client.post(f"/api/v1/attachments/{second['id']}/discard").status_code == 204
    assert create_intent(client, size=len(data)).status_code == 201


@pytest.mark.redis
def test_intent_counter_lives_in_redis(alice, settings, frozen_now):
    """Every web process shares the count: it is in Redis, not in one process's memory."""
    import redis
    from django.core.cache import cache, caches

    assert settings.REDIS_URL, "the real run uses Redis: set REDIS_URL"
    assert type(caches["default"]).__name__ == "RedisCache"
    settings.AIRLOCK_RATE_LIMITS = settings.AIRLOCK_RATE_LIMITS.replace(intents_per_minute=2)
    client = client_for(alice)
    assert create_intent(client).status_code == 201
    from attachments.services.ratelimits import intent_rate_key

    key = cache.make_key(intent_rate_key(user=alice, now=FROZEN))
    assert int(redis.Redis.from_url(settings.REDIS_URL).get(key)) == 1
    # Another process (a second client on the same Redis) bumps the same counter.
    redis.Redis.from_url(settings.REDIS_URL).incr(key)
    _assert_rate_limited(create_intent(client))


@pytest.mark.parametrize(
    "path, body",
    [
        (
            "/api/v1/uploads",
            {"profile": "image", "filename": "x" * 4000, "size": 1, "content_type": "image/jpeg"},
        ),
        ("/api/v1/attachments/heartbeat", {"ids": ["0" * 36] * 200}),
        ("/api/v1/attachments/commit", {"ids": ["0" * 36] * 200, "ref": "listing:1"}),
        ("/api/v1/uploads/{intent}/complete", {"parts": [{"x": "y" * 4000}]}),
    ],
)
def test_json_bodies_over_the_limit_are_413(alice, settings, path, body):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    payload = json.dumps(body)
    assert len(payload) > 1024
    client = client_for(alice)
    if "{intent}" in path:
        path = path.format(intent=create_intent(client).json()["id"])
    response = client.post(path, payload, content_type="application/json")
    assert response.status_code == 413, response.content
    error = response.json()["error"]
    assert error["code"] == "TOO_LARGE"
    assert error["details"] == {"max_bytes": 1024}


def test_json_body_under_the_limit_is_read(alice, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    response = client_for(alice).post(
        "/api/v1/attachments/heartbeat", json.dumps({"ids": ["a"]}), content_type="application/json"
    )
    assert response.status_code == 200


def test_default_json_limit_is_two_mib(settings):
    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE == 2 * 1024 * 1024
