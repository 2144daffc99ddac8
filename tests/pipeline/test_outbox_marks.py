"""Sent marks in bulk: the jobs a process sends are marked sent together, in one UPDATE.

Each hop of a file would otherwise write its job's "sent" mark alone, one UPDATE
and one commit per job. With outbox.SENT_MARK_DELAY_S the marks wait a moment and
go out together; a mark that never gets written only makes the relay tick send
its job again. Tests mark at once (tests/conftest.py) unless they turn it on, as here.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from attachments import jobs
from attachments.models import OutboxMessage
from attachments.services import outbox

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def bulk_marks(monkeypatch):
    monkeypatch.setattr(outbox, "SENT_MARK_DELAY_S", 60)  # no timer fires during the test: the test flushes
    yield
    outbox.flush_sent_marks()


def _enqueue_committed(n: int) -> list[int]:
    ids = []
    for i in range(n):
        with transaction.atomic():
            ids.append(outbox.enqueue(jobs.WEBHOOK_DELIVER, i).pk)
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


def test_the_timer_writes_the_marks_on_its_own(monkeypatch):
    monkeypatch.setattr(outbox, "SENT_MARK_DELAY_S", 0.05)
    ids = _enqueue_committed(2)
    deadline = time.monotonic() + 10
    while OutboxMessage.objects.filter(pk__in=ids, sent_at__isnull=True).exists():
        assert time.monotonic() < deadline, "the marks were never written"
        time.sleep(0.05)


def test_without_a_delay_each_job_is_marked_as_it_is_sent(monkeypatch):
    monkeypatch.setattr(outbox, "SENT_MARK_DELAY_S", 0)
    [pk] = _enqueue_committed(1)
    assert OutboxMessage.objects.get(pk=pk).sent_at is not None


def test_marks_the_database_refused_are_held_for_the_next_flush(bulk_marks, monkeypatch):
    ids = _enqueue_committed(2)
    real_write = outbox._write_marks

    def down(_ids: list[int]) -> None:
        raise RuntimeError("database down")

    monkeypatch.setattr(outbox, "_write_marks", down)
    with pytest.raises(RuntimeError):
        outbox.flush_sent_marks()
    monkeypatch.setattr(outbox, "_write_marks", real_write)
    assert outbox.flush_sent_marks() == 2
    assert not OutboxMessage.objects.filter(pk__in=ids, sent_at__isnull=True).exists()


def test_a_process_defers_its_marks_unless_told_otherwise():
    """Only the tests' fixture marks at once: serve's and rundramatiq's processes import the module as it is."""
    probe = "from attachments.services import outbox; print(outbox.SENT_MARK_DELAY_S)"
    out = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {probe}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    ).stdout
    assert float(out) == 0.25
