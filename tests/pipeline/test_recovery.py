"""The database rebuilds the work: expired leases retry, lost jobs are re-driven, the outbox relays."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from attachments.models import Attachment, DeadLetter, OutboxMessage
from processing import pipeline
from processing.recovery import expire_leases, redrive_pending
from tests.support import jpeg_bytes, run_pipeline, upload

pytestmark = pytest.mark.django_db


def test_expired_lease_goes_back_to_pending_with_attempts_plus_one(alice, api, settings):
    attachment_id = upload(api(alice), jpeg_bytes())
    pipeline.start_and_intake(uuid.UUID(attachment_id))  # a worker took it... and died
    assert Attachment.objects.get(pk=attachment_id).status == "processing"
    assert expire_leases() == 0  # lease still valid
    later = timezone.now() + timedelta(seconds=settings.AIRLOCK_RETRIES.lease_seconds + 1)
    assert expire_leases(now=later) == 1
    row = Attachment.objects.get(pk=attachment_id)
    assert (row.status, row.attempts, row.lease_token) == ("pending", 1, None)
    assert OutboxMessage.objects.filter(actor_name="intake", args__0=attachment_id).count() >= 1
    assert run_pipeline(attachment_id) == "ready"


def test_lease_expiring_at_the_attempt_cap_is_dead_lettered(alice, api, settings):
    attachment_id = upload(api(alice), jpeg_bytes())
    Attachment.objects.filter(pk=attachment_id).update(attempts=settings.AIRLOCK_RETRIES.max_attempts - 1)
    pipeline.start_and_intake(uuid.UUID(attachment_id))
    assert expire_leases(now=timezone.now() + timedelta(days=1)) == 1
    row = Attachment.objects.get(pk=attachment_id)
    assert (row.status, row.reason_code) == ("failed", "infrastructure")
    assert DeadLetter.objects.filter(attachment_id=attachment_id, kind="processing").exists()


def test_pending_with_bytes_but_no_job_is_redriven(alice, api):
    attachment_id = upload(api(alice), jpeg_bytes())
    OutboxMessage.objects.all().delete()  # the broker lost it, and the outbox row too
    assert redrive_pending(older_than_seconds=3600) == 0  # recent: the job may still come
    assert redrive_pending(now=timezone.now() + timedelta(hours=2), older_than_seconds=3600) == 1
    assert OutboxMessage.objects.filter(actor_name="intake", args__0=attachment_id).exists()


def test_malformed_messages_are_dead_lettered_not_retried(db):
    from processing import actors

    actors.intake.fn("not-a-uuid")
    actors.scan.fn("only-one-arg")
    actors.derive.fn(str(uuid.uuid4()), "bad-token")
    assert DeadLetter.objects.filter(kind="message").count() == 3
