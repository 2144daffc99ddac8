"""Two threads refreshing attachments at once: a 500 on the upload PUT under load.

Found by bench/time_to_ready.py's overload burst against `manage.py serve`
(threaded web server + worker threads in one process): a few signed PUTs
answered 500 "Direct status modification is not allowed" although their bytes
were stored and processed. upload_content_receive() ends with
attachment.refresh_from_db(), and django-fsm-2 implements refresh_from_db on a
protected FSMField by switching `protected` off *on the shared field object*
and back on afterwards. That is process-wide state: when two threads refresh
at once, the first to finish switches protection back on while the second is
still assigning the fields it read, and the second raises AttributeError.

Fixed in attachments/models.py: Attachment.refresh_from_db takes a
module-level lock, so refreshes take turns. This test holds two refreshes
inside their queries in the interleaving that used to fail.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from attachments.models import Attachment
from tests.support import client_for, jpeg_bytes, upload

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_threads_refreshing_attachments_at_once(alice):
    first_id = upload(client_for(alice), jpeg_bytes())
    second_id = upload(client_for(alice), jpeg_bytes((80, 60)))
    a_in_query, a_release = threading.Event(), threading.Event()
    b_in_query, b_release = threading.Event(), threading.Event()
    errors: dict[str, BaseException] = {}

    def gate(entered: threading.Event, release: threading.Event):
        def wrapper(execute, sql, params, many, context):
            result = execute(sql, params, many, context)  # the row is read...
            entered.set()
            release.wait(10)  # ...and its fields not yet assigned when we hold here
            return result
        return wrapper

    def refresh(name: str, attachment_id: str, entered, release) -> None:
        row = Attachment.objects.get(pk=attachment_id)
        try:
            with connection.execute_wrapper(gate(entered, release)):
                row.refresh_from_db()
        except BaseException as exc:  # noqa: BLE001 - inspected below
            errors[name] = exc
        finally:
            connection.close()

    a = threading.Thread(target=refresh, args=("a", first_id, a_in_query, a_release))
    b = threading.Thread(target=refresh, args=("b", second_id, b_in_query, b_release))
    a.start()
    assert a_in_query.wait(10)  # A switched protection off and is inside its query
    b.start()
    b_in_query.wait(2)  # B found it off (nothing to restore) and is inside its query (unless serialised)
    a_release.set()
    a.join(10)  # A finished and switched protection back on
    b_release.set()
    b.join(10)  # B now assigns status with protection on
    if errors:
        raise next(iter(errors.values()))
