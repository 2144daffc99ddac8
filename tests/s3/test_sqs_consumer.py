"""consume_storage_events: real S3 → SQS notifications from moto, and messages that are not events."""

from __future__ import annotations

import json

import pytest
from django.db import DatabaseError

from attachments.models import Attachment, DeadLetter, StorageEvent
from tests.s3.support import consume, intent, send_upload
from tests.support import jpeg_bytes, run_pipeline

pytestmark = [pytest.mark.s3, pytest.mark.django_db]


def test_bucket_notifications_flow_through_the_queue_into_the_pipeline(
    s3, alice, api, django_capture_on_commit_callbacks
):
    queue_url = s3.notify_queue()
    first = s3.sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0)["Messages"]
    assert json.loads(first[0]["Body"])["Event"] == "s3:TestEvent"  # moto, like S3, says hello first
    data = jpeg_bytes()
    created = intent(api(alice), data, filename="via-sqs.jpg", content_type="image/jpeg")
    assert send_upload(created["upload"], data).status_code in (200, 201, 204)
    rogue = "tenants/acme/image/00000000-0000-4000-8000-00000000beef"
    s3.put(rogue, b"GIF89a not from an intent")

    with django_capture_on_commit_callbacks(execute=True):
        report = consume(s3, queue_url)
    assert "messages=3" in report and "deleted=3" in report and "dead_lettered=0" in report
    assert "test_event=1" in report and "started=1" in report and "unknown_key=1" in report
    assert not s3.exists(rogue)
    # Deleting the rogue object made S3 notify its removal; that event changes nothing.
    assert "ignored=1" in consume(s3, queue_url)
    assert s3.queue_depth(queue_url) == 0
    row = Attachment.objects.get(pk=created["id"])
    assert StorageEvent.objects.get(key=row.storage_key).source == "sqs"
    assert run_pipeline(row.pk) == "ready"

    # Removing a ready original (moto notifies ObjectRemoved:Delete) changes nothing.
    s3.delete(row.storage_key)
    assert "ignored=1" in consume(s3, queue_url)
    row.refresh_from_db()
    assert row.status == "ready"


@pytest.mark.parametrize(
    "body",
    [
        "this is not json",
        "[1, 2, 3]",
        '{"Records": "nope"}',
        '{"hello": "world"}',
        '{"Type": "Notification", "Message": "{broken"}',
    ],
)
def test_a_malformed_message_is_dead_lettered_and_deleted(s3, body):
    queue_url = s3.sqs.create_queue(QueueName=f"bad-{abs(hash(body))}")["QueueUrl"]
    s3.sqs.send_message(QueueUrl=queue_url, MessageBody=body)
    report = consume(s3, queue_url)
    assert "messages=1" in report and "dead_lettered=1" in report and "deleted=1" in report
    assert s3.queue_depth(queue_url) == 0
    letter = DeadLetter.objects.get()
    assert letter.kind == "message" and letter.payload["body"] == body and letter.last_error
    assert consume(s3, queue_url).startswith("messages=0")  # not retried forever


def test_sns_wrapped_events_are_unwrapped(s3, alice, api):
    data = jpeg_bytes()
    created = intent(api(alice), data, filename="sns.jpg", content_type="image/jpeg")
    send_upload(created["upload"], data)
    key = Attachment.objects.get(pk=created["id"]).storage_key
    from tests.s3.support import event_for

    queue_url = s3.sqs.create_queue(QueueName="sns-wrapped")["QueueUrl"]
    envelope = {"Type": "Notification", "MessageId": "m-1", "Message": json.dumps(event_for(s3, key))}
    s3.sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(envelope))
    assert "started=1" in consume(s3, queue_url)


def test_good_records_are_kept_and_bad_ones_dead_lettered(s3, alice, api):
    from tests.s3.support import event_for

    data = jpeg_bytes()
    created = intent(api(alice), data, filename="mixed.jpg", content_type="image/jpeg")
    send_upload(created["upload"], data)
    key = Attachment.objects.get(pk=created["id"]).storage_key
    queue_url = s3.sqs.create_queue(QueueName="mixed")["QueueUrl"]
    document = event_for(s3, key)
    document["Records"].append({"eventName": "ObjectCreated:Put", "s3": {"bucket": {}}})
    s3.sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(document))
    report = consume(s3, queue_url)
    assert "started=1" in report and "malformed=1" in report and "dead_lettered=1" in report
    assert s3.queue_depth(queue_url) == 0
    assert DeadLetter.objects.get().kind == "message"


def test_a_message_that_cannot_be_recorded_stays_then_is_dead_lettered(s3, alice, api, monkeypatch):
    from attachments.services import storage_events
    from tests.s3.support import event_for

    data = jpeg_bytes()
    created = intent(api(alice), data, filename="down.jpg", content_type="image/jpeg")
    send_upload(created["upload"], data)
    key = Attachment.objects.get(pk=created["id"]).storage_key
    queue_url = s3.sqs.create_queue(QueueName="db-down", Attributes={"VisibilityTimeout": "0"})["QueueUrl"]
    s3.sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(event_for(s3, key)))

    def database_down(**kwargs):
        raise DatabaseError("connection refused")

    monkeypatch.setattr(storage_events, "storage_events_record", database_down)
    report = consume(s3, queue_url, "--max-receives", "3")
    # Left twice for redelivery, dead-lettered on the third receive: never lost, never forever.
    assert "left_for_retry=2" in report and "dead_lettered=1" in report
    assert s3.queue_depth(queue_url) == 0
    assert "connection refused" in DeadLetter.objects.get().last_error
    assert not StorageEvent.objects.exists()
