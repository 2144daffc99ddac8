"""A broker that lost its state (Redis restarted empty, or flushed) is noticed once; the database rebuilds the work."""

from __future__ import annotations

import uuid

import pytest

from attachments.models import Attachment, OutboxMessage
from attachments.shared_redis import backend_redis
from processing import broker_epoch, pipeline
from tests.support import jpeg_bytes, run_pipeline, upload

pytestmark = pytest.mark.django_db


def _forget_epoch() -> None:
    backend_redis().delete(broker_epoch.epoch_key())


def _jobs(actor: str, attachment_id: str) -> int:
    return OutboxMessage.objects.filter(actor_name=actor, args__0=attachment_id).count()


@pytest.mark.redis
def test_a_lost_epoch_redrives_every_file_with_its_bytes_in_once(alice, bob, mallory, api):
    pending = upload(api(alice), jpeg_bytes((200, 100)))
    leased = upload(api(mallory), jpeg_bytes((210, 100)))
    assert (
        pipeline.start_and_intake(uuid.UUID(leased)) == "advanced"
    )  # at derive (intake ran the scan), its job in the lost broker
    row = Attachment.objects.get(pk=leased)
    never_sent = api(bob).post(
        "/api/v1/uploads",
        {"profile": "image", "filename": "x.jpg", "size": 10, "content_type": "image/jpeg"},
        format="json",
    )
    assert never_sent.status_code == 201  # no bytes: nothing to re-drive
    broker_epoch.check_broker_epoch()  # whatever state this test process's Redis was in: an epoch now
    intake_before, derive_before = _jobs("intake", pending), _jobs("derive", leased)

    _forget_epoch()  # as a restarted, empty Redis
    assert broker_epoch.check_broker_epoch() == 2
    assert _jobs("intake", pending) == intake_before + 1
    assert _jobs("derive", leased) == derive_before + 1
    resent = OutboxMessage.objects.filter(actor_name="derive", args__0=leased).latest("pk")
    # the same lease (whoever runs first wins), with its tenant and subject
    assert resent.args == [leased, str(row.lease_token), str(row.tenant_id), row.subject]
    assert not OutboxMessage.objects.filter(args__0=never_sent.json()["id"]).exists()

    assert broker_epoch.check_broker_epoch() == 0, "one loss, one re-drive"
    assert run_pipeline(pending) == "ready"
    assert pipeline.run_stage(row.pk, row.lease_token, "derive") == "ready"
    assert pipeline.run_stage(row.pk, row.lease_token, "derive") == "stale", "the duplicate job changes nothing"


def test_without_a_shared_broker_there_is_nothing_to_lose(alice, api, settings):
    settings.REDIS_URL = None
    upload(api(alice), jpeg_bytes((200, 100)))
    assert broker_epoch.check_broker_epoch() == 0
