"""The database connection dropped in the middle of a transition: never half-updated, ready after recovery.

The drop happens inside the transaction that flips the row to ready: after the
row was saved and the audit row written, before the commit. The transaction
must vanish whole (status, audit row, derivative rows), the lease then expires
and the reconciler re-drives the file to ready.
"""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone

from attachments.models import Attachment, TransitionLog
from processing import pipeline
from processing.recovery import expire_leases
from tests.support import client_for, jpeg_bytes, run_pipeline, upload

from .support import assert_not_served, assert_ready_and_complete, assert_served_intact, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def _assert_untouched_by_the_failed_flip(attachment_id: str) -> None:
    row = Attachment.objects.get(pk=attachment_id)
    assert (row.status, row.step) == ("processing", "derive"), (row.status, row.step)
    assert row.lease_token is not None and row.ready_at is None
    assert not TransitionLog.objects.filter(attachment=row, transition="finish").exists()
    assert not row.derivatives.exists(), "derivative rows were written in the rolled-back transaction"


def _recover(attachment_id: str) -> None:
    later = timezone.now() + timedelta(seconds=settings.AIRLOCK_RETRIES.lease_seconds + 1)
    assert expire_leases(now=later) == 1
    assert Attachment.objects.get(pk=attachment_id).status == "pending"


def test_connection_lost_inside_the_flip_rolls_it_back_whole(alice, bob, mallory, monkeypatch):
    """Inline, any database: the raw connection is closed under Django mid-transaction."""
    import attachments.services.processing as services

    real = services.apply_transition_unlocked  # the flip to ready, from the row derive read

    def dropping(attachment, name, **kwargs):
        result = real(attachment, name, **kwargs)
        if name == "finish":
            connection.connection.close()  # the socket/file is gone; Django does not know yet
        return result

    attachment_id = upload(client_for(alice), jpeg_bytes((640, 480)))
    assert pipeline.start_and_intake(uuid.UUID(attachment_id)) == "advanced"
    row = Attachment.objects.get(pk=attachment_id)  # intake ran the scan: derive is next
    monkeypatch.setattr(services, "apply_transition_unlocked", dropping)
    with pytest.raises(DatabaseError):
        pipeline.run_stage(row.pk, row.lease_token, "derive")
    monkeypatch.undo()
    connection.close()  # what the worker's DbConnectionsMiddleware does after a failed job

    _assert_untouched_by_the_failed_flip(attachment_id)
    assert_not_served(attachment_id, bob, mallory)
    _recover(attachment_id)
    assert run_pipeline(attachment_id) == "ready"
    assert_ready_and_complete(attachment_id)
    assert_served_intact(attachment_id, bob)


@pytest.mark.postgres
def test_backend_terminated_mid_flip_in_a_live_worker(alice, bob, mallory, live_worker, monkeypatch):
    """A real worker thread; another connection kills its PostgreSQL backend inside the flip."""
    import attachments.services.processing as services

    # The flip to ready runs from the row derive read (no lock read).
    real_transition, real_advance = services.apply_transition_unlocked, pipeline.attachment_advance
    killed: list[int] = []
    failures: list[BaseException] = []

    def terminate(pid: int) -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
                for _ in range(200):  # bounded: wait until the backend is really gone
                    cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid])
                    if cursor.fetchone()[0] == 0:
                        break
                    threading.Event().wait(0.01)
        finally:
            connection.close()

    def dropping(attachment, name, **kwargs):
        result = real_transition(attachment, name, **kwargs)
        if name == "finish" and not killed:
            killed.append(connection.connection.info.backend_pid)
            killer = threading.Thread(target=terminate, args=(killed[0],))
            killer.start()
            killer.join(10)
        return result

    def advance(*args, **kwargs):
        try:
            return real_advance(*args, **kwargs)
        except BaseException as exc:
            failures.append(exc)
            raise

    monkeypatch.setattr(services, "apply_transition_unlocked", dropping)
    monkeypatch.setattr(pipeline, "attachment_advance", advance)
    attachment_id = upload(client_for(alice), jpeg_bytes((640, 480)))
    wait_until(lambda: failures, 60, "the flip to fail on the killed connection")
    assert killed and isinstance(failures[0], DatabaseError), failures
    _assert_untouched_by_the_failed_flip(attachment_id)
    assert_not_served(attachment_id, bob, mallory)

    # The worker runs the job again on a fresh connection after a short backoff (processing/outages.py):
    # the file heals without waiting for its lease to expire.
    wait_until(lambda: Attachment.objects.get(pk=attachment_id).status == "ready", 60, "ready after recovery")
    assert_ready_and_complete(attachment_id)
    assert_served_intact(attachment_id, bob)
    # The worker's threads are still healthy: later files go through on fresh connections.
    more = [upload(client_for(alice), jpeg_bytes((200 + i, 100))) for i in range(6)]
    wait_until(lambda: all(Attachment.objects.get(pk=i).status == "ready" for i in more), 60, "later files")
