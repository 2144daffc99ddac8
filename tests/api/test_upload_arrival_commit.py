"""A signed PUT's bytes land before the one transaction that records them (uploaded_at, event, intake job).

Two racing PUTs: the first to finish keeps the key, the other is refused and
writes nothing. A crash (or a database outage) after the bytes land and before
that commit loses nothing: the row still waits for its bytes, so the
reconciler's poll of silent uploads finds the object, and a retried PUT records
it at once.
"""

from __future__ import annotations

import pytest
from django.db import OperationalError

from attachments.errors import AlreadyUploaded, TooLarge
from attachments.models import Attachment, OutboxMessage, StorageEvent
from attachments.signing import upload_token
from attachments.storage import get_gateway
from attachments.uploads.services import uploads
from processing.recovery import pick_up_silent_uploads
from tests.support import create_intent, jpeg_bytes, put_bytes

pytestmark = pytest.mark.django_db(transaction=True)


def _intent(client, data: bytes) -> dict:
    response = create_intent(client, size=len(data))
    assert response.status_code == 201, response.content
    return response.json()


def _receive(attachment_id, chunks):
    return uploads.upload_content_receive(
        attachment_id=attachment_id, token=upload_token(attachment_id), chunks=chunks, content_length=None
    )


def test_of_two_racing_puts_the_first_to_finish_keeps_the_key(alice, api):
    first, second = jpeg_bytes((64, 48)), jpeg_bytes((48, 64))
    intent = _intent(api(alice), max(first, second, key=len))
    row = Attachment.objects.get(pk=intent["id"])
    answers: dict[str, object] = {}

    def slow_body():
        yield first[:100]
        # The other PUT starts and finishes while this one is still streaming.
        answers["second"] = _receive(row.pk, lambda: iter([second]))
        yield first[100:]

    with pytest.raises(AlreadyUploaded):
        _receive(row.pk, slow_body)
    assert answers["second"].uploaded_at is not None
    assert get_gateway().read_range(row.storage_key, 0, len(second) + 10) == second
    assert StorageEvent.objects.filter(key=row.storage_key, outcome="started").count() == 1
    assert OutboxMessage.objects.filter(actor_name="intake").count() == 1
    assert Attachment.objects.get(pk=row.pk).uploaded_at is not None


def _bytes_in_but_arrival_lost(intent: dict, data: bytes, monkeypatch) -> Attachment:
    """A signed PUT whose bytes land but whose arrival's transaction fails (the database went away)."""
    row = Attachment.objects.get(pk=intent["id"])

    def database_gone(**kwargs):
        raise OperationalError("the server closed the connection")

    monkeypatch.setattr(uploads, "object_arrived", database_gone)
    with pytest.raises(OperationalError):
        _receive(row.pk, lambda: iter([data]))
    monkeypatch.undo()
    return row


def test_bytes_whose_arrival_was_not_committed_are_found_by_the_reconciler(alice, api, monkeypatch):
    data = jpeg_bytes((64, 48))
    intent = _intent(api(alice), data)
    row = _bytes_in_but_arrival_lost(intent, data, monkeypatch)
    # The bytes are in and nothing recorded them: the row still waits, as after a crash at that point.
    assert get_gateway().head(row.storage_key) is not None
    assert Attachment.objects.get(pk=row.pk).uploaded_at is None
    assert not OutboxMessage.objects.filter(actor_name="intake").exists()
    assert pick_up_silent_uploads() == 1
    assert Attachment.objects.get(pk=row.pk).uploaded_at is not None
    assert OutboxMessage.objects.filter(actor_name="intake").count() == 1


def test_a_retried_put_after_a_lost_commit_records_the_arrival(alice, api, monkeypatch):
    data = jpeg_bytes((64, 48))
    intent = _intent(api(alice), data)
    row = _bytes_in_but_arrival_lost(intent, data, monkeypatch)
    response = put_bytes(intent["upload"]["url"], data)
    # The key holds the first attempt's bytes: the retry is refused, and records them.
    assert response.status_code == 409 and response.json()["error"]["code"] == "ALREADY_UPLOADED"
    assert Attachment.objects.get(pk=row.pk).uploaded_at is not None
    assert StorageEvent.objects.filter(key=row.storage_key, outcome="started").count() == 1
    assert OutboxMessage.objects.filter(actor_name="intake").count() == 1


def test_a_refused_body_leaves_the_url_usable_and_writes_nothing(alice, api):
    data = jpeg_bytes((64, 48))
    intent = _intent(api(alice), data)
    row = Attachment.objects.get(pk=intent["id"])
    with pytest.raises(TooLarge):
        _receive(row.pk, lambda: iter([data, b"x" * 10]))
    assert get_gateway().head(row.storage_key) is None
    assert Attachment.objects.get(pk=row.pk).uploaded_at is None
    assert put_bytes(intent["upload"]["url"], data).status_code == 202
