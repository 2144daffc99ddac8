"""Infrastructure trouble costs no attempt: blips are retried in the worker, a dependency that is down is waited for.

Attempts (and `failed`) are for a file that keeps failing while its
dependencies answer: a clamd that answers PING but errors on every scan.
"""

from __future__ import annotations

import uuid

import pytest
from django.db import OperationalError

from attachments.models import Attachment, DeadLetter, TransitionLog
from attachments.storage.base import StorageError
from processing import actors, outages, pipeline
from tests.support import client_for, jpeg_bytes, run_pipeline, upload
from tests.support.fake_clamd import erroring_clamd

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _short_waits(monkeypatch):
    monkeypatch.setattr(outages, "JOB_RETRY_FIRST_DELAY", 0.01)
    monkeypatch.setattr(outages, "JOB_RETRY_MAX_DELAY", 0.05)


def _at_derive(attachment_id: str) -> Attachment:
    """Intake (which runs the scan) done: the file waits for its derive job."""
    assert pipeline.start_and_intake(uuid.UUID(attachment_id)) == "advanced"
    row = Attachment.objects.get(pk=attachment_id)
    assert (row.status, row.step) == ("processing", "derive")
    return row


def test_a_database_disconnect_mid_job_runs_the_job_again_without_an_attempt(alice, monkeypatch):
    attachment_id = upload(client_for(alice), jpeg_bytes((320, 240)))
    row = _at_derive(attachment_id)
    real = pipeline.attachment_advance
    failures = []

    def disconnecting(**kwargs):
        if len(failures) < 2:
            failures.append(1)
            raise OperationalError("server closed the connection unexpectedly")
        return real(**kwargs)

    monkeypatch.setattr(pipeline, "attachment_advance", disconnecting)
    actors.derive.fn(str(row.pk), str(row.lease_token), str(row.tenant_id))  # what the worker runs, inline
    row = Attachment.objects.get(pk=attachment_id)
    assert len(failures) == 2
    assert (row.status, row.attempts) == ("ready", 0)


def test_a_database_outage_longer_than_the_budget_leaves_the_file_to_the_lease(alice, monkeypatch):
    attachment_id = upload(client_for(alice), jpeg_bytes((320, 240)))
    row = _at_derive(attachment_id)
    monkeypatch.setattr(outages, "JOB_RETRY_SECONDS", 0.2)
    calls = []

    def down(**kwargs):
        calls.append(1)
        raise OperationalError("connection refused")

    monkeypatch.setattr(pipeline, "attachment_advance", down)
    with pytest.raises(OperationalError):
        actors.derive.fn(str(row.pk), str(row.lease_token), str(row.tenant_id))
    assert len(calls) >= 2, "tried again with backoff before giving the job up"  # derive: each try decodes again
    assert Attachment.objects.get(pk=attachment_id).lease_token == row.lease_token


def test_a_storage_blip_inside_a_stage_is_retried_in_the_worker(alice, monkeypatch):
    attachment_id = upload(client_for(alice), jpeg_bytes((320, 240)))
    row = _at_derive(attachment_id)
    real = pipeline.WORK["derive"]
    failures = []

    def flaky(attachment):
        if len(failures) < 2:
            failures.append(1)
            raise StorageError("503 SlowDown")
        return real(attachment)

    monkeypatch.setitem(pipeline.WORK, "derive", flaky)
    assert pipeline.run_stage(row.pk, row.lease_token, "derive") == "ready"
    assert len(failures) == 2 and Attachment.objects.get(pk=attachment_id).attempts == 0


def test_storage_down_makes_the_file_wait_not_fail(alice, monkeypatch, settings):
    from attachments.storage import get_gateway

    monkeypatch.setattr(outages, "STORAGE_RETRY_SECONDS", 0.05)
    attachment_id = upload(client_for(alice), jpeg_bytes((320, 240)))
    gateway = type(get_gateway())

    def refused(*args, **kwargs):
        raise StorageError("connection refused")

    for _ in range(settings.AIRLOCK_RETRIES.max_attempts + 1):
        row = _at_derive(attachment_id)
        with monkeypatch.context() as down:
            down.setattr(gateway, "ping", refused)
            down.setitem(pipeline.WORK, "derive", refused)
            assert pipeline.run_stage(row.pk, row.lease_token, "derive") == "waiting"
        row = Attachment.objects.get(pk=attachment_id)
        assert (row.status, row.attempts) == ("pending", 0)
        assert row.dependency_wait_at is not None, "the hand-back is noted: the wait is not the tenant's backlog"
    assert not DeadLetter.objects.filter(attachment_id=attachment_id).exists()
    # One release row for the whole wait, however many tries it took (a long outage writes no row per try).
    waits = settings.AIRLOCK_RETRIES.max_attempts + 1
    [release] = TransitionLog.objects.filter(attachment_id=attachment_id, transition="release")
    assert release.message.startswith("waiting for storage") and release.details["waits"] == waits
    assert release.details["since"] < release.created_at.isoformat()
    assert TransitionLog.objects.filter(attachment_id=attachment_id, transition="start").count() == 1
    assert run_pipeline(attachment_id) == "ready"
    transitions = list(
        TransitionLog.objects.filter(attachment_id=attachment_id).order_by("id").values_list("transition", flat=True)
    )
    assert transitions[-4:] == ["arrived", "scan", "start", "finish"]
    assert transitions.count("release") == 1


def test_a_file_that_keeps_failing_against_a_healthy_scanner_spends_its_attempts(alice, settings):
    attachment_id = upload(client_for(alice), jpeg_bytes((320, 240)))
    with erroring_clamd(settings):
        statuses = [run_pipeline(attachment_id) for _ in range(settings.AIRLOCK_RETRIES.max_attempts)]
    assert statuses == ["pending"] * (settings.AIRLOCK_RETRIES.max_attempts - 1) + ["failed"]
    row = Attachment.objects.get(pk=attachment_id)
    assert row.reason_code == "infrastructure" and "clamd error" in row.reason_message
    assert DeadLetter.objects.filter(attachment_id=attachment_id, kind="processing").exists()
    assert row.dependency_wait_at is None, "a failure against a healthy scanner is not a wait"
    assert not TransitionLog.objects.filter(attachment_id=attachment_id, transition="release").exists()


def test_a_bug_in_a_stage_spends_an_attempt_at_once_not_after_the_lease(alice, monkeypatch, settings):
    """An error that is neither the content's nor a dependency's (a bug) counts an attempt now:
    the file is retried, then failed with a dead letter, instead of sitting in processing until
    its lease runs out."""
    attachment_id = upload(client_for(alice), jpeg_bytes((320, 240)))

    def broken(attachment):
        raise AttributeError("a bug")

    monkeypatch.setitem(pipeline.WORK, "derive", broken)
    row = _at_derive(attachment_id)
    assert pipeline.run_stage(row.pk, row.lease_token, "derive") == "retried"
    row = Attachment.objects.get(pk=attachment_id)
    assert row.status == "pending" and row.attempts == 1 and row.lease_token is None
    statuses = [run_pipeline(attachment_id) for _ in range(settings.AIRLOCK_RETRIES.max_attempts - 1)]
    assert statuses[-1] == "failed"
    row = Attachment.objects.get(pk=attachment_id)
    assert "unexpected AttributeError: a bug" in row.reason_message
    assert DeadLetter.objects.filter(attachment_id=attachment_id, kind="processing").exists()
