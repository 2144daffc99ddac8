"""Loading a field that a narrow read left out works, in a thread of its own."""

from __future__ import annotations

import threading

import pytest

from attachments.models import Attachment
from tests.support import jpeg_bytes, run_pipeline, upload

pytestmark = pytest.mark.django_db(transaction=True)


def _in_thread(fn, timeout: float = 10.0):
    result: dict = {}

    def run() -> None:
        from django.db import connection

        try:
            result["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - reported below
            result["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), "reading a deferred field hung"
    if "error" in result:
        raise result["error"]
    return result["value"]


def test_a_deferred_field_loads_on_access(alice, api):
    attachment_id = upload(api(alice), jpeg_bytes((64, 48)))
    assert run_pipeline(attachment_id) == "ready"
    expected = Attachment.objects.get(pk=attachment_id)

    def read() -> tuple:
        row = Attachment.objects.only("id", "filename").get(pk=attachment_id)
        return row.stored_size, row.status, row.metadata

    assert _in_thread(read) == (expected.stored_size, "ready", expected.metadata)


def test_a_read_that_names_no_status_still_loads_it(alice, api):
    """AttachmentQuerySet.only() adds `status`: the FSM mixin reads it for every row it builds."""
    attachment_id = upload(api(alice), jpeg_bytes((64, 48)))
    row = _in_thread(lambda: Attachment.objects.only("id").get(pk=attachment_id))
    assert "status" in row.__dict__ and row.status == "pending"


def test_deferred_loads_in_many_threads_at_once_all_succeed(alice, api):
    """A worker's threads load deferred columns at the same time (each refresh lifts the status
    field's shared `protected` flag for its length): none of them may find it put back under it."""
    attachment_id = upload(api(alice), jpeg_bytes((64, 48)))
    assert run_pipeline(attachment_id) == "ready"
    expected = Attachment.objects.get(pk=attachment_id).served_key
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def reader() -> None:
        from django.db import connection

        try:
            start.wait()
            for _ in range(40):
                row = Attachment.objects.only("id").get(pk=attachment_id)
                assert row.served_key == expected
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=reader, daemon=True) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    assert not errors, errors[:3]
