"""The broker is only a doorbell: jobs lost in it, or never handed to it, are rebuilt from the database."""

from __future__ import annotations

from datetime import timedelta

import dramatiq
import pytest
from django.conf import settings
from django.utils import timezone

from attachments.models import Attachment, OutboxMessage
from attachments.services import outbox
from ops.runtime import QUEUES, start_worker
from processing.recovery import recover
from tests.support import client_for, jpeg_bytes, upload

from .support import assert_not_served, assert_ready_and_complete, assert_served_intact, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def _all_ready(ids: list[str]) -> bool:
    return all(s == "ready" for s in Attachment.objects.filter(pk__in=ids).values_list("status", flat=True))


@pytest.mark.redis
def test_jobs_queued_in_a_flushed_redis_are_redriven_by_the_reconciler(alice, bob, mallory):
    import redis

    broker = dramatiq.get_broker()
    broker.flush_all()
    namespace = broker.namespace
    client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=3)
    ids = [upload(client_for(alice), jpeg_bytes((200 + i, 100))) for i in range(8)]  # no worker yet
    assert client.llen(f"{namespace}:intake") == 8, "the jobs wait in Redis"

    # FLUSHDB of this run's namespace only: the Redis server is shared with other runs.
    for key in client.scan_iter(match=f"{namespace}:*", count=1000):
        client.delete(key)
    worker = start_worker(threads=2)
    try:
        for queue in QUEUES:
            broker.join(queue, timeout=10_000)
        assert set(Attachment.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"pending"}
        # The outbox did its part (the messages were sent): only the reconciler can rebuild them.
        assert outbox.relay_pending(older_than_seconds=0) == 0
        for attachment_id in ids:
            assert_not_served(attachment_id, bob, mallory)
        report = recover(now=timezone.now() + timedelta(seconds=settings.AIRLOCK_RETRIES.max_seconds * 2 + 300))
        assert report.redriven == 8
        wait_until(lambda: _all_ready(ids), 60, "every file to be ready")
    finally:
        worker.stop(timeout=10_000)
        broker.flush_all()
    for attachment_id in ids:
        assert_ready_and_complete(attachment_id)
        assert_served_intact(attachment_id, bob)


def test_jobs_enqueued_while_the_broker_is_down_are_relayed_when_it_returns(
    alice, bob, mallory, live_worker, monkeypatch
):
    broker = dramatiq.get_broker()

    def broker_down(message, *, delay=None):
        raise ConnectionError("Error 111 connecting to the broker. Connection refused.")

    monkeypatch.setattr(broker, "enqueue", broker_down)
    ids = [upload(client_for(alice), jpeg_bytes((200 + i, 100))) for i in range(5)]  # uploads still succeed
    unsent = OutboxMessage.objects.filter(sent_at__isnull=True)
    assert unsent.count() == 5 and all(m.send_attempts >= 1 for m in unsent)
    assert outbox.relay_pending(older_than_seconds=0) == 0  # still down: nothing lost, nothing sent
    for attachment_id in ids:
        assert Attachment.objects.get(pk=attachment_id).status == "pending"
        assert_not_served(attachment_id, bob, mallory)

    monkeypatch.undo()  # the broker is back
    assert outbox.relay_pending(older_than_seconds=0) == 5
    wait_until(lambda: _all_ready(ids), 60, "every file to be ready")
    assert not OutboxMessage.objects.filter(sent_at__isnull=True).exists()
    for attachment_id in ids:
        assert_ready_and_complete(attachment_id)
        assert_served_intact(attachment_id, bob)
