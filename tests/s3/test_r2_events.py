"""POST /api/v1/storage-events with Cloudflare R2's own notifications: every action down the same ladder."""

from __future__ import annotations

import logging

import pytest
from prometheus_client import REGISTRY

from attachments.models import Attachment, OutboxMessage, StorageEvent
from attachments.services.processing import attachment_begin
from attachments.storage import StorageError
from tests.s3.support import R2_CREATED, R2_REMOVED, intent, post_events, r2_body, r2_body_for, send_upload
from tests.support import jpeg_bytes, run_pipeline

pytestmark = [pytest.mark.s3, pytest.mark.django_db]


def _uploaded(s3, client) -> Attachment:
    data = jpeg_bytes()
    created = intent(client, data, filename="r2.jpg", content_type="image/jpeg")
    assert send_upload(created["upload"], data).status_code in (200, 201, 204)
    return Attachment.objects.get(pk=created["id"])


def _intake_jobs(row: Attachment) -> int:
    return sum(1 for m in OutboxMessage.objects.filter(actor_name="intake") if str(row.pk) in m.args)


def _records(shape: str, outcome: str) -> float:
    return REGISTRY.get_sample_value("airlock_storage_event_records_total", {"shape": shape, "outcome": outcome}) or 0


@pytest.mark.parametrize("action", R2_CREATED)
def test_every_created_action_starts_intake_once(s3, events_token, alice, api, action):
    row = _uploaded(s3, api(alice))
    body = r2_body_for(s3, row.storage_key, action=action)
    response = post_events(body, token=events_token)
    assert response.status_code == 202
    assert response.json() == {
        "accepted": 1,
        "unknown": 0,
        "results": [{"index": 0, "outcome": "started", "retry": False}],
    }
    event = StorageEvent.objects.get(key=row.storage_key)
    assert (event.event_name, event.source, event.outcome) == (action, "webhook", "started")
    # Redelivered (R2's queue is at least once): recorded once, one intake job.
    assert post_events(body, token=events_token).json()["results"][0]["outcome"] == "duplicate"
    assert StorageEvent.objects.filter(key=row.storage_key).count() == 1 and _intake_jobs(row) == 1
    assert run_pipeline(row.pk) == "ready"


@pytest.mark.parametrize("action", R2_REMOVED)
def test_every_removed_action_rejects_a_file_in_flight_object_missing(s3, events_token, alice, api, action):
    row = _uploaded(s3, api(alice))
    assert post_events(r2_body_for(s3, row.storage_key), token=events_token).status_code == 202
    assert attachment_begin(attachment_id=row.pk) is not None
    s3.delete(row.storage_key)
    removed = r2_body(s3.bucket, row.storage_key, action=action, event_time="2026-12-06T10:05:00.000Z")
    answer = post_events(removed, token=events_token).json()
    assert answer["results"] == [{"index": 0, "outcome": "object_missing", "retry": False}]
    row.refresh_from_db()
    assert (row.status, row.reason_code) == ("rejected", "object_missing")
    assert post_events(removed, token=events_token).json()["results"][0]["outcome"] == "duplicate"


@pytest.mark.parametrize("action", R2_REMOVED)
def test_a_removal_of_a_ready_file_changes_nothing(s3, events_token, alice, api, action):
    row = _uploaded(s3, api(alice))
    post_events(r2_body_for(s3, row.storage_key), token=events_token)
    assert run_pipeline(row.pk) == "ready"
    row.refresh_from_db()
    s3.delete(row.storage_key)
    answer = post_events(r2_body(s3.bucket, row.storage_key, action=action), token=events_token).json()
    assert answer["results"][0]["outcome"] == "ignored"
    row.refresh_from_db()
    assert row.status == "ready"


def test_delete_delivered_before_its_create_is_harmless_in_either_order(s3, events_token, alice, api):
    row = _uploaded(s3, api(alice))
    created = r2_body_for(s3, row.storage_key, event_time="2026-12-06T10:00:00.000Z")
    stale_delete = r2_body(s3.bucket, row.storage_key, action="DeleteObject", event_time="2026-12-06T09:00:00.000Z")
    # One relay batch, the older delete after the create: the object is there, so nothing ends.
    answer = post_events([created, stale_delete], token=events_token).json()
    assert [r["outcome"] for r in answer["results"]] == ["started", "still_present"]
    # And the same two again, the other way round: both duplicates.
    answer = post_events([stale_delete, created], token=events_token).json()
    assert [r["outcome"] for r in answer["results"]] == ["duplicate", "duplicate"]
    assert _intake_jobs(row) == 1
    assert run_pipeline(row.pk) == "ready"


def test_a_batch_answers_per_message_and_counts_unknown_actions(s3, events_token, alice, api, caplog):
    row = _uploaded(s3, api(alice))
    before = _records("r2", "unknown"), _records("r2", "malformed")
    batch = [
        r2_body_for(s3, row.storage_key),
        {**r2_body(s3.bucket, row.storage_key), "action": "PutBucketPolicy"},
        {"action": "PutObject", "bucket": s3.bucket},  # no object
        r2_body(s3.bucket, "tenants/acme/image/not-ours-at-all", action="DeleteObject"),
    ]
    with caplog.at_level(logging.WARNING, logger="airlock.storage_events"):
        response = post_events(batch, token=events_token)
    assert response.status_code == 202
    body = response.json()
    assert body["accepted"] == 2 and body["unknown"] == 1
    assert [(r["index"], r["outcome"], r["retry"]) for r in body["results"]] == [
        (0, "started", False),
        (1, "unknown", False),
        (2, "malformed", False),
        (3, "ignored", False),
    ]
    assert _records("r2", "unknown") == before[0] + 1 and _records("r2", "malformed") == before[1] + 1
    unknown = [r for r in caplog.records if r.getMessage() == "storage event of an unknown action"]
    assert len(unknown) == 1 and unknown[0].action == "PutBucketPolicy"


@pytest.mark.parametrize("size", [2**63, 2**70])
def test_a_size_no_store_could_hold_is_malformed_not_retried(s3, events_token, size):
    """A lie in `object.size` is the sender's: answered malformed (not 500/503, which a relay retries forever)."""
    body = r2_body(s3.bucket, "tenants/acme/image/abc.jpg", action="DeleteObject")
    body["object"]["size"] = size
    alone = post_events(body, token=events_token)
    assert alone.status_code == 202, alone.content
    assert [(r["outcome"], r["retry"]) for r in alone.json()["results"]] == [("malformed", False)]
    in_a_batch = post_events(
        [body, r2_body(s3.bucket, "tenants/acme/image/x.jpg", action="DeleteObject")], token=events_token
    )
    assert in_a_batch.status_code == 202
    assert [(r["outcome"], r["retry"]) for r in in_a_batch.json()["results"]] == [
        ("malformed", False),
        ("ignored", False),
    ]
    assert not StorageEvent.objects.filter(size__gt=2**62).exists()


def test_r2_keys_are_taken_as_they_are_not_url_decoded(s3, events_token, alice, api):
    row = _uploaded(s3, api(alice))
    encoded = row.storage_key.replace("/", "%2F")
    s3.put(encoded, b"a different object")
    answer = post_events(r2_body_for(s3, encoded), token=events_token).json()
    assert answer["results"][0]["outcome"] == "invalid_key"
    row.refresh_from_db()
    assert row.uploaded_at is None


def test_a_record_that_cannot_be_applied_now_is_retried_alone(s3, events_token, alice, api, monkeypatch):
    first, second = _uploaded(s3, api(alice)), _uploaded(s3, api(alice))
    batch = [r2_body_for(s3, first.storage_key), r2_body_for(s3, second.storage_key)]
    from attachments.storage.s3 import S3Gateway

    real_head = S3Gateway.head

    def head(self, key):
        if key == second.storage_key:
            raise StorageError("HEAD: connection reset")
        return real_head(self, key)

    monkeypatch.setattr(S3Gateway, "head", head)
    answer = post_events(batch, token=events_token).json()
    assert [(r["outcome"], r["retry"]) for r in answer["results"]] == [("started", False), ("error", True)]
    assert answer["accepted"] == 1
    # Only failures: a dependency outage, 503 with Retry-After, so the relay retries everything.
    response = post_events([batch[1]], token=events_token)
    assert response.status_code == 503 and response["Retry-After"]
    monkeypatch.setattr(S3Gateway, "head", real_head)
    assert post_events(batch, token=events_token).json()["results"][1]["outcome"] == "started"
    assert _intake_jobs(first) == 1 and _intake_jobs(second) == 1


def test_another_buckets_notification_never_touches_ours(s3, events_token, alice, api):
    row = _uploaded(s3, api(alice))
    body = r2_body_for(s3, row.storage_key)
    body["bucket"] = "someone-elses-bucket"
    assert post_events(body, token=events_token).json()["results"][0]["outcome"] == "foreign_bucket"
    assert not StorageEvent.objects.exists()
