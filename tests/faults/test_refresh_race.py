"""Serving threads never refresh an Attachment in place: a 500 on the upload PUT under load.

Found by bench/time_to_ready.py's overload burst against `manage.py serve`
(threaded web server + worker threads in one process): a few signed PUTs
answered 500 "Direct status modification is not allowed". django-fsm-2 reloads
a protected FSMField in refresh_from_db() by switching `protected` off *on the
field object every thread shares* and back on afterwards; two threads doing it
at once interleave, and one assigns the status while protection is back on.
The same refresh runs whenever a deferred column loads, and
ConcurrentTransitionMixin loads `status` for every row it builds.

So the application never calls it: the upload paths re-read a row as a new
instance, and every narrow read includes `status`
(AttachmentQuerySet.only()). These tests refuse any refresh of an Attachment
while the paths that used to refresh run, from several threads at once.
"""

from __future__ import annotations

import threading

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection

from attachments.models import Attachment
from attachments.storage import get_gateway
from tests.support import client_for, create_intent, jpeg_bytes, png_bytes, put_bytes, run_pipeline

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def refreshes(monkeypatch) -> list[str]:
    """Every refresh_from_db of an Attachment, by the fields it asked for (it still runs)."""
    seen: list[str] = []
    real = Attachment.refresh_from_db

    def record(self, *args, fields=None, **kwargs):
        seen.append(",".join(fields or ["*"]))
        return real(self, *args, fields=fields, **kwargs)

    monkeypatch.setattr(Attachment, "refresh_from_db", record)
    return seen


def _in_threads(fn, count: int) -> list[object]:
    results: list[object] = [None] * count

    def run(i: int) -> None:
        try:
            results[i] = fn(i)
        except BaseException as exc:  # noqa: BLE001 - reported below
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return results


def test_signed_puts_from_several_threads_never_refresh_a_row(alice, refreshes):
    client = client_for(alice)
    data = jpeg_bytes()
    urls = [create_intent(client, size=len(data)).json()["upload"]["url"] for _ in range(6)]
    results = _in_threads(lambda i: put_bytes(urls[i], data).status_code, len(urls))
    assert results == [202] * len(urls)
    assert refreshes == []


def test_upload_through_and_complete_never_refresh_a_row(alice, refreshes):
    client = client_for(alice)

    def through(i: int) -> int:
        file = SimpleUploadedFile(f"p{i}.png", png_bytes(), content_type="image/png")
        return (
            client_for(alice)
            .post("/api/v1/attachments", {"profile": "image", "file": file}, format="multipart")
            .status_code
        )

    assert _in_threads(through, 4) == [202] * 4

    intent = create_intent(client, size=len(jpeg_bytes())).json()
    get_gateway().write_chunks(Attachment.objects.get(pk=intent["id"]).storage_key, [jpeg_bytes()])
    response = client.post(f"/api/v1/uploads/{intent['id']}/complete")
    assert response.status_code == 202 and response.json()["status"] == "pending"
    assert refreshes == []


def test_processing_never_refreshes_a_row(alice, refreshes):
    client = client_for(alice)
    ids = [create_intent(client, size=len(jpeg_bytes())).json() for _ in range(2)]
    for intent in ids:
        assert put_bytes(intent["upload"]["url"], jpeg_bytes()).status_code == 202
    assert _in_threads(lambda i: run_pipeline(ids[i]["id"]), len(ids)) == ["ready"] * len(ids)
    assert refreshes == []


def test_the_check_sees_a_refresh(alice, refreshes):
    row = Attachment.objects.get(pk=create_intent(client_for(alice), size=10).json()["id"])
    row.refresh_from_db()
    Attachment.objects.defer("filename").get(pk=row.pk).filename  # noqa: B018 - a deferred load
    # One refresh for the deferred column: the base manager's read brings `status` along, so the
    # row copy it builds needs no refresh of its own.
    assert refreshes == ["*", "filename"]
