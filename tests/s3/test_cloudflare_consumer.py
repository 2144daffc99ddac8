"""consume_storage_events --cloudflare-queue: R2 notifications pulled over Cloudflare Queues' HTTP API.

The queue is a local stand-in that follows Cloudflare's documented bodies
(tests/s3/cloudflare_queues_fake.py); the SDK is the official one, pointed at it.
"""

from __future__ import annotations

import os
import signal

import pytest
from django.core.management import CommandError, call_command

from attachments.models import Attachment, OutboxMessage, QueueConsumerState, StorageEvent
from attachments.services import cloudflare_queue
from attachments.services.processing import attachment_begin
from attachments.storage import StorageError
from tests.s3.support import consume_cloudflare, intent, r2_body, r2_body_for, send_upload
from tests.support import jpeg_bytes, run_pipeline

pytestmark = [pytest.mark.s3, pytest.mark.django_db]

QUEUE = "q-r2-events"


def _uploaded(client, n: int = 1) -> list[Attachment]:
    rows = []
    for _ in range(n):
        data = jpeg_bytes()
        created = intent(client, data, filename="r2.jpg", content_type="image/jpeg")
        assert send_upload(created["upload"], data).status_code in (200, 201, 204)
        rows.append(Attachment.objects.get(pk=created["id"]))
    return rows


def _intake_jobs(row: Attachment) -> int:
    return sum(1 for m in OutboxMessage.objects.filter(actor_name="intake") if str(row.pk) in m.args)


@pytest.fixture
def restore_signals():
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def test_every_r2_action_is_applied_and_acked(s3, alice, api, cloudflare_queues):
    fake = cloudflare_queues
    put, copy, multipart, deleted, expired = _uploaded(api(alice), 5)
    for row, action in ((put, "PutObject"), (copy, "CopyObject"), (multipart, "CompleteMultipartUpload")):
        fake.send(QUEUE, r2_body_for(s3, row.storage_key, action=action))
    # Two files in flight whose objects go away: one deleted, one removed by a lifecycle rule.
    for row in (deleted, expired):
        fake.send(QUEUE, r2_body_for(s3, row.storage_key))
    consume_cloudflare(fake, QUEUE)
    for row in (deleted, expired):
        assert attachment_begin(attachment_id=row.pk) is not None
        s3.delete(row.storage_key)
    fake.send(QUEUE, r2_body(s3.bucket, deleted.storage_key, action="DeleteObject"))
    fake.send(QUEUE, r2_body(s3.bucket, expired.storage_key, action="LifecycleDeletion"))
    fake.send(QUEUE, {**r2_body(s3.bucket, put.storage_key), "action": "PutBucketCors"})

    report = consume_cloudflare(fake, QUEUE)
    assert "messages=3" in report and "acked=3" in report and "retried=0" in report
    assert "object_missing=2" in report and "unknown=1" in report
    assert fake.depth(QUEUE) == 0 and not fake.queue(QUEUE).dead_letters
    for row in (deleted, expired):
        row.refresh_from_db()
        assert (row.status, row.reason_code) == ("rejected", "object_missing")
    events = {e.key: e for e in StorageEvent.objects.filter(event_name__in=["PutObject", "CopyObject"])}
    assert events[put.storage_key].source == "cloudflare" and events[copy.storage_key].outcome == "started"
    assert StorageEvent.objects.get(key=multipart.storage_key).event_name == "CompleteMultipartUpload"
    for row in (put, copy, multipart):
        assert _intake_jobs(row) == 1
        assert run_pipeline(row.pk) == "ready"
    # Every ack named leases only, as Cloudflare's API takes them.
    calls = fake.queue(QUEUE).ack_calls
    assert all(set(a) == {"lease_id"} for call in calls for a in call["acks"])


def test_a_poisoned_message_is_retried_alone_while_its_nine_neighbours_are_applied(
    s3, alice, api, cloudflare_queues, monkeypatch
):
    fake = cloudflare_queues
    rows = _uploaded(api(alice), 10)
    poisoned = rows[4]
    for row in rows:
        fake.send(QUEUE, r2_body_for(s3, row.storage_key))
    from attachments.storage.s3 import S3Gateway

    real_head = S3Gateway.head

    def head(self, key):
        if key == poisoned.storage_key:
            raise StorageError("HEAD: the poisoned one")
        return real_head(self, key)

    monkeypatch.setattr(S3Gateway, "head", head)

    report = consume_cloudflare(fake, QUEUE)
    assert "messages=10" in report and "acked=9" in report and "retried=1" in report
    (call,) = fake.queue(QUEUE).ack_calls
    assert len(call["acks"]) == 9 and len(call["retries"]) == 1
    assert call["retries"][0]["delay_seconds"] == 10  # the first retry waits the base delay
    assert fake.depth(QUEUE) == 1
    for row in rows:
        assert _intake_jobs(row) == (0 if row is poisoned else 1)

    # It keeps failing: each retry waits longer, then the queue's max_retries (3) dead-letters it.
    delays = []
    for _ in range(3):
        fake.advance(3600)
        consume_cloudflare(fake, QUEUE)
        delays.append(fake.queue(QUEUE).ack_calls[-1]["retries"][0]["delay_seconds"])
    assert delays == [20, 40, 80]
    assert fake.depth(QUEUE) == 0 and len(fake.queue(QUEUE).dead_letters) == 1
    assert fake.queue(QUEUE).dead_letters[0].attempts == 4
    # And once the bucket answers again, the neighbours were never touched twice.
    monkeypatch.setattr(S3Gateway, "head", real_head)
    assert StorageEvent.objects.count() == 9


@pytest.mark.parametrize("body", ["this is not json", '{"hello": "world"}', '{"action": "PutObject"}'])
def test_a_message_that_is_no_notification_goes_to_the_dead_letter_queue(s3, cloudflare_queues, body):
    fake = cloudflare_queues
    fake.send(QUEUE, body)
    for _ in range(4):
        assert "retried=1" in consume_cloudflare(fake, QUEUE)
        fake.advance(3600)
    assert consume_cloudflare(fake, QUEUE).startswith("messages=0")
    assert [m.body for m in fake.queue(QUEUE).dead_letters] == [body]
    assert not StorageEvent.objects.exists()


def test_a_consumer_killed_mid_batch_loses_nothing(s3, alice, api, cloudflare_queues, monkeypatch):
    fake = cloudflare_queues
    rows = _uploaded(api(alice), 10)
    for row in rows:
        fake.send(QUEUE, r2_body_for(s3, row.storage_key))
    real = cloudflare_queue.storage_events_record
    applied = []

    def dies_on_the_fifth(**kwargs):
        if len(applied) == 4:
            raise SystemExit("killed")  # nothing after this line runs: no ack is sent
        applied.append(1)
        return real(**kwargs)

    monkeypatch.setattr(cloudflare_queue, "storage_events_record", dies_on_the_fifth)
    with pytest.raises(SystemExit):
        consume_cloudflare(fake, QUEUE)
    assert not fake.queue(QUEUE).ack_calls and fake.depth(QUEUE) == 10
    assert StorageEvent.objects.count() == 4

    monkeypatch.setattr(cloudflare_queue, "storage_events_record", real)
    assert consume_cloudflare(fake, QUEUE).startswith("messages=0")  # still leased to the dead consumer
    fake.advance(61)  # its 60 s leases run out: the queue delivers them again
    report = consume_cloudflare(fake, QUEUE)
    assert "messages=10" in report and "acked=10" in report and "duplicate=4" in report and "started=6" in report
    assert fake.depth(QUEUE) == 0
    assert StorageEvent.objects.count() == 10
    assert all(_intake_jobs(row) == 1 for row in rows)


def test_sigterm_stops_after_the_message_in_hand_and_leaves_the_rest_leased(
    s3, alice, api, cloudflare_queues, monkeypatch, restore_signals
):
    fake = cloudflare_queues
    rows = _uploaded(api(alice), 6)
    for row in rows:
        fake.send(QUEUE, r2_body_for(s3, row.storage_key))
    real = cloudflare_queue.storage_events_record
    seen = []

    def terminated_on_the_third(**kwargs):
        seen.append(1)
        if len(seen) == 3:
            os.kill(os.getpid(), signal.SIGTERM)  # what a deploy sends
        return real(**kwargs)

    monkeypatch.setattr(cloudflare_queue, "storage_events_record", terminated_on_the_third)
    report = consume_cloudflare(fake, QUEUE, "--wait-seconds", "1")  # no --once: it runs until told to stop
    assert "messages=6" in report and "acked=3" in report and "left_leased=3" in report
    assert fake.depth(QUEUE) == 3
    state = QueueConsumerState.objects.get()
    assert state.stopped_at is not None and state.backlog == 6

    monkeypatch.setattr(cloudflare_queue, "storage_events_record", real)
    fake.advance(61)
    assert "acked=3" in consume_cloudflare(fake, QUEUE)
    assert fake.depth(QUEUE) == 0 and all(_intake_jobs(row) == 1 for row in rows)


@pytest.mark.django_db(transaction=True)  # /readyz reads in its own threads and connections
def test_lag_is_reported_in_readyz_and_metrics(s3, alice, api, cloudflare_queues, client, settings):
    fake = cloudflare_queues
    for row in _uploaded(api(alice), 3):
        fake.send(QUEUE, r2_body_for(s3, row.storage_key))
    consume_cloudflare(fake, QUEUE, "--once", "--max-messages", "1")
    name = f"cloudflare:{fake.account}/{QUEUE}"
    # The last pull saw an empty queue; the one before it saw the last message waiting.
    assert QueueConsumerState.objects.get(name=name).backlog == 0
    QueueConsumerState.objects.filter(name=name).update(backlog=42)

    body = client.get("/readyz").json()
    (queue,) = body["checks"]["storage"]["queues"]
    assert (queue["name"], queue["backlog"], queue["running"], queue["stale"]) == (name, 42, True, False)
    assert body["checks"]["storage"]["state"] == "ok"

    settings.AIRLOCK_METRICS_TOKEN = None
    from ops.metrics import render_latest

    text = render_latest()[0].decode()
    assert f'airlock_storage_queue_backlog{{queue="{name}"}} 42.0' in text
    assert f'airlock_storage_queue_poll_age_seconds{{queue="{name}"}}' in text

    # A consumer that stopped polling without a clean stop: still ready, but degraded.
    from datetime import timedelta

    from django.utils import timezone

    QueueConsumerState.objects.filter(name=name).update(polled_at=timezone.now() - timedelta(minutes=10))
    body = client.get("/readyz").json()
    assert body["checks"]["storage"]["ok"] and body["checks"]["storage"]["queues"][0]["stale"]
    assert any(d.startswith("storage: storage-event consumer not polling") for d in body["degraded"])


def test_the_token_comes_from_the_setting_never_a_flag(s3, cloudflare_queues, settings):
    settings.AIRLOCK_CLOUDFLARE_API_TOKEN = None
    with pytest.raises(CommandError, match="AIRLOCK_CLOUDFLARE_API_TOKEN"):
        consume_cloudflare(cloudflare_queues, QUEUE)
    with pytest.raises(CommandError, match="ACCOUNT_ID/QUEUE_ID"):
        call_command("consume_storage_events", "--cloudflare-queue", "just-a-queue", "--once")
    settings.AIRLOCK_CLOUDFLARE_API_TOKEN = "wrong"
    with pytest.raises(Exception, match="Authentication error|403"):
        consume_cloudflare(cloudflare_queues, QUEUE)
