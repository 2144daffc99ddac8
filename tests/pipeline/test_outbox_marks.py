"""Sent marks in bulk: the jobs a process sends are marked sent together, in one UPDATE.

Each hop of a file used to write its job's "sent" mark alone, one UPDATE and one
commit per job. With AIRLOCK_OUTBOX_MARK_DELAY_MS the marks wait a moment and
go out together; a mark that never gets written only makes the relay tick send
its job again.
"""

from __future__ import annotations

import time

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from attachments.models import OutboxMessage
from attachments.services import outbox

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def bulk_marks(settings):
    settings.AIRLOCK_OUTBOX_MARK_DELAY_MS = 60_000  # no timer fires during the test: the test flushes
    yield
    outbox.flush_sent_marks()


def _enqueue_committed(n: int) -> list[int]:
    ids = []
    for i in range(n):
        with transaction.atomic():
            ids.append(outbox.enqueue("webhook_deliver", i).pk)
    return ids


def test_jobs_sent_from_several_transactions_are_marked_in_one_update(bulk_marks):
    with CaptureQueriesContext(connection) as sends:
        ids = _enqueue_committed(5)
    # Each transaction wrote its job; no transaction wrote a mark.
    assert not [q for q in sends.captured_queries if q["sql"].startswith("UPDATE")], sends.captured_queries
    assert OutboxMessage.objects.filter(pk__in=ids, sent_at__isnull=True).count() == 5
    with CaptureQueriesContext(connection) as flush:
        assert outbox.flush_sent_marks() == 5
    assert [q["sql"].split(None, 1)[0] for q in flush.captured_queries] == ["UPDATE"]
    assert not OutboxMessage.objects.filter(pk__in=ids, sent_at__isnull=True).exists()
    assert outbox.flush_sent_marks() == 0  # nothing held: no statement


def test_the_relay_tick_writes_this_processs_marks_before_it_looks_for_unsent_jobs(bulk_marks, monkeypatch):
    ids = _enqueue_committed(3)
    resent: list[int] = []
    monkeypatch.setattr(outbox, "relay_one", lambda pk: resent.append(pk) or True)
    assert outbox.relay_pending(older_than_seconds=0) == 0
    assert resent == []
    assert not OutboxMessage.objects.filter(pk__in=ids, sent_at__isnull=True).exists()


def test_the_timer_writes_the_marks_on_its_own(settings):
    settings.AIRLOCK_OUTBOX_MARK_DELAY_MS = 50
    ids = _enqueue_committed(2)
    deadline = time.monotonic() + 10
    while OutboxMessage.objects.filter(pk__in=ids, sent_at__isnull=True).exists():
        assert time.monotonic() < deadline, "the marks were never written"
        time.sleep(0.05)


def test_without_a_delay_each_job_is_marked_as_it_is_sent(settings):
    settings.AIRLOCK_OUTBOX_MARK_DELAY_MS = 0
    [pk] = _enqueue_committed(1)
    assert OutboxMessage.objects.get(pk=pk).sent_at is not None
