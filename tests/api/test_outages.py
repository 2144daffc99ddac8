"""A dependency that fails mid-request is a 503 with Retry-After (never a 500); the broker is only a doorbell."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
import redis.exceptions
from rest_framework.test import APIClient

from attachments.models import Attachment, OutboxMessage
from attachments.storage import get_gateway
from attachments.storage.base import StorageError
from tests.support import create_intent, jpeg_bytes, put_bytes

pytestmark = pytest.mark.django_db


def _unavailable(response) -> None:
    assert response.status_code == 503, (response.status_code, response.content[:300])
    assert response.json()["error"]["code"] == "UNAVAILABLE"
    assert int(response["Retry-After"]) >= 1


def _boom(*args, **kwargs):
    raise StorageError("storage is down")


def test_storage_down_on_the_upload_put_is_503_and_the_url_stays_valid(alice, api, monkeypatch):
    data = jpeg_bytes()
    intent = create_intent(api(alice), size=len(data)).json()
    gateway_type = type(get_gateway())
    parts = urlsplit(intent["upload"]["url"])
    with monkeypatch.context() as patch:
        patch.setattr(gateway_type, "write_chunks", _boom)
        patch.setattr(gateway_type, "create_chunks", _boom)  # the signed PUT's create-only write (local)
        # As a real server answers: the handler's response, not the exception re-raised into the test.
        refused = APIClient(raise_request_exception=False).generic(
            "PUT", f"{parts.path}?{parts.query}", data, content_type="image/jpeg"
        )
        _unavailable(refused)
    assert Attachment.objects.get(pk=intent["id"]).uploaded_at is None
    assert put_bytes(intent["upload"]["url"], data).status_code == 202


def test_the_rate_limit_store_down_is_503(alice, api, monkeypatch):
    from django.core.cache import cache

    from attachments.services import ratelimits

    def down(*args, **kwargs):
        raise redis.exceptions.ConnectionError("Error 111 connecting to redis")

    monkeypatch.setattr(cache, "add", down)  # the local-memory counter (no REDIS_URL)
    # The Redis counter: a client whose server does not answer (nothing listens on port 1).
    monkeypatch.setattr(ratelimits, "shared_redis", lambda: redis.Redis(port=1, socket_connect_timeout=1))
    _unavailable(create_intent(api(alice)))


def test_broker_down_still_accepts_the_upload_and_keeps_the_job(alice, api, monkeypatch):
    import dramatiq

    def down(*args, **kwargs):
        raise redis.exceptions.ConnectionError("Error 111 connecting to redis")

    data = jpeg_bytes()
    intent = create_intent(api(alice), size=len(data)).json()
    monkeypatch.setattr(type(dramatiq.get_broker()), "enqueue", down)
    assert put_bytes(intent["upload"]["url"], data).status_code == 202
    # The job is a row in the outbox: the relay tick sends it once the broker is back.
    assert OutboxMessage.objects.filter(actor_name="intake", sent_at__isnull=True).exists()
