"""PUT /api/v1/uploads/{id}/content: signed, expiring, single-use, bounded."""

import threading
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core import signing
from django.db import connection

from attachments.models import Attachment, StorageEvent
from attachments.storage import get_gateway
from tests.support import create_intent, jpeg_bytes, put_bytes

pytestmark = pytest.mark.django_db


def _intent(client, data, **kw):
    response = create_intent(client, size=len(data), **kw)
    assert response.status_code == 201
    return response.json()


def _error(response):
    return response.status_code, response.json()["error"]["code"]


def test_put_stores_bytes_and_records_one_event(alice, api):
    data = jpeg_bytes()
    intent = _intent(api(alice), data)
    response = put_bytes(intent["upload"]["url"], data)
    assert response.status_code == 202
    assert response.json()["id"] == intent["id"] and response.json()["status"] == "pending"
    row = Attachment.objects.get(pk=intent["id"])
    assert row.uploaded_at is not None
    assert get_gateway().read_range(row.storage_key, 0, len(data) + 10) == data
    assert StorageEvent.objects.filter(key=row.storage_key, outcome="started").count() == 1


def test_second_upload_is_409_already_uploaded(alice, api):
    data = jpeg_bytes()
    intent = _intent(api(alice), data)
    assert put_bytes(intent["upload"]["url"], data).status_code == 202
    assert _error(put_bytes(intent["upload"]["url"], data)) == (409, "ALREADY_UPLOADED")


def test_tampered_token_is_403_and_does_not_use_the_url_up(alice, api):
    data = jpeg_bytes()
    intent = _intent(api(alice), data)
    url = intent["upload"]["url"]
    tampered = url[:-3] + ("aaa" if not url.endswith("aaa") else "bbb")
    assert _error(put_bytes(tampered, data)) == (403, "UPLOAD_TOKEN_INVALID")
    no_token = url.split("?")[0] + "?token="
    assert _error(put_bytes(no_token, data)) == (403, "UPLOAD_TOKEN_INVALID")
    assert put_bytes(url, data).status_code == 202


def test_token_for_another_intent_is_403(alice, api):
    data = jpeg_bytes()
    first = _intent(api(alice), data)
    second = _intent(api(alice), data)
    token = parse_qs(urlsplit(first["upload"]["url"]).query)["token"][0]
    other = second["upload"]["url"].split("?")[0] + f"?token={token}"
    assert _error(put_bytes(other, data)) == (403, "UPLOAD_TOKEN_INVALID")
    assert Attachment.objects.get(pk=second["id"]).uploaded_at is None


def test_expired_token_is_403(alice, api, monkeypatch, settings):
    data = jpeg_bytes()
    intent = _intent(api(alice), data)
    real_time = signing.time.time
    monkeypatch.setattr(signing.time, "time", lambda: real_time() + settings.AIRLOCK_URL_SECONDS.upload + 5)
    assert _error(put_bytes(intent["upload"]["url"], data)) == (403, "UPLOAD_TOKEN_INVALID")


def test_body_longer_than_declared_is_413_and_nothing_is_kept(alice, api):
    data = jpeg_bytes()
    intent = _intent(api(alice), data)
    assert _error(put_bytes(intent["upload"]["url"], data + b"x" * 10)) == (413, "TOO_LARGE")
    row = Attachment.objects.get(pk=intent["id"])
    assert row.uploaded_at is None and get_gateway().head(row.storage_key) is None
    # The refused attempt did not use the URL up.
    assert put_bytes(intent["upload"]["url"], data).status_code == 202


def test_streamed_body_is_cut_at_the_limit_even_without_content_length(alice, api):
    from attachments.errors import TooLarge
    from attachments.uploads.services.uploads import upload_content_receive

    data = jpeg_bytes()
    intent = _intent(api(alice), data)
    token = parse_qs(urlsplit(intent["upload"]["url"]).query)["token"][0]
    produced = []

    def endless():
        while True:
            produced.append(1)
            yield b"\xff" * 1024

    with pytest.raises(TooLarge):
        upload_content_receive(attachment_id=intent["id"], token=token, chunks=endless, content_length=None)
    # The server stopped reading right after the limit.
    assert len(produced) <= len(data) // 1024 + 2
    assert get_gateway().head(Attachment.objects.get(pk=intent["id"]).storage_key) is None


@pytest.mark.django_db(transaction=True)
def test_concurrent_puts_store_once(alice, api):
    data = jpeg_bytes()
    intent = _intent(api(alice), data)
    results = []

    def put():
        try:
            results.append(put_bytes(intent["upload"]["url"], data).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=put) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results).count(202) == 1
    assert set(results) <= {202, 409}
    assert StorageEvent.objects.filter(outcome="started").count() == 1


def test_upload_to_discarded_intent_is_refused(alice, api):
    data = jpeg_bytes()
    client = api(alice)
    intent = _intent(client, data)
    assert client.post(f"/api/v1/attachments/{intent['id']}/discard").status_code == 204
    response = put_bytes(intent["upload"]["url"], data)
    assert response.status_code == 404
    assert get_gateway().head(Attachment.objects.get(pk=intent["id"]).storage_key) is None


def test_put_without_content_length_is_refused_and_keeps_the_url(alice, api):
    from urllib.parse import urlsplit

    from django.test import Client

    data = jpeg_bytes()
    intent = _intent(api(alice), data)
    parts = urlsplit(intent["upload"]["url"])
    response = Client().put(f"{parts.path}?{parts.query}", data=data, content_type="image/jpeg", CONTENT_LENGTH="")
    assert response.status_code == 400 and response.json()["error"]["code"] == "VALIDATION_ERROR"
    assert Attachment.objects.get(pk=intent["id"]).uploaded_at is None
    assert put_bytes(intent["upload"]["url"], data).status_code == 202


@pytest.mark.parametrize("length", ["-1", "abc", "1e3"])
def test_a_negative_or_malformed_content_length_is_400_and_keeps_the_url(alice, api, length):
    """Any server may hand the header through as it came (the dev server did: -1 stored an empty object)."""
    from rest_framework.test import APIClient

    data = jpeg_bytes()
    intent = _intent(api(alice), data)
    parts = urlsplit(intent["upload"]["url"])
    response = APIClient().generic(
        "PUT", f"{parts.path}?{parts.query}", b"", content_type="image/jpeg", CONTENT_LENGTH=length
    )
    assert _error(response) == (400, "VALIDATION_ERROR")
    assert Attachment.objects.get(pk=intent["id"]).uploaded_at is None
    assert put_bytes(intent["upload"]["url"], data).status_code == 202


def test_a_content_length_too_large_for_an_int_is_413(alice, api):
    from rest_framework.test import APIClient

    data = jpeg_bytes()
    intent = _intent(api(alice), data)
    parts = urlsplit(intent["upload"]["url"])
    response = APIClient().generic(
        "PUT", f"{parts.path}?{parts.query}", b"", content_type="image/jpeg", CONTENT_LENGTH="9" * 5000
    )
    assert _error(response) == (413, "TOO_LARGE")
    assert put_bytes(intent["upload"]["url"], data).status_code == 202
