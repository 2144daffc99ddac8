"""POST /api/v1/storage-events: bearer auth, and the ladder every object-created event goes down."""

from __future__ import annotations

import uuid

import pytest

from attachments.models import Attachment, OutboxMessage, StorageEvent, TransitionLog
from attachments.services.processing import attachment_begin
from processing import pipeline
from tests.s3.support import event_for, intent, post_events, s3_record, send_upload
from tests.support import jpeg_bytes, pdf_bytes, run_pipeline

pytestmark = [pytest.mark.s3, pytest.mark.django_db]


def _uploaded(s3, client, data: bytes, **kwargs) -> Attachment:
    created = intent(client, data, **kwargs)
    response = send_upload(created["upload"], data)
    assert response.status_code in (200, 201, 204), response.text
    return Attachment.objects.get(pk=created["id"])


def _intake_jobs(attachment: Attachment) -> int:
    return sum(1 for m in OutboxMessage.objects.filter(actor_name="intake") if str(attachment.pk) in m.args)


# --- authentication and parsing --------------------------------------------------


@pytest.mark.parametrize(
    ("token", "scheme"),
    [
        (None, "Bearer"),  # no Authorization header
        ("wrong-token", "Bearer"),
        ("storage-events-test-token-", "Bearer"),  # a prefix match is not a match
        ("storage-events-test-token", "Token"),  # the user-token scheme is not this endpoint's
        ("", "Bearer"),
    ],
)
def test_without_the_right_bearer_token_it_is_401(s3, events_token, token, scheme):
    response = post_events({"Records": []}, token=token, scheme=scheme)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "NOT_AUTHENTICATED"
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("token", [None, "", "None", "storage-events-test-token"])
def test_with_the_setting_unset_everyone_gets_401(s3, settings, token):
    settings.AIRLOCK_STORAGE_EVENTS_TOKEN = None
    assert post_events({"Records": []}, token=token).status_code == 401
    settings.AIRLOCK_STORAGE_EVENTS_TOKEN = ""
    assert post_events({"Records": []}, token=token).status_code == 401


def test_user_api_tokens_do_not_open_it(s3, events_token, alice):
    assert post_events({"Records": []}, token=alice.api_token, scheme="Token").status_code == 401
    assert post_events({"Records": []}, token=alice.api_token).status_code == 401


@pytest.mark.parametrize(
    "raw",
    [
        b"{not json",
        b"[1, 2]",
        b'"Records"',
        b"\xff\xfe",
        b"",
        b'{"Records": 5}',
        b'{"hello": "world"}',  # neither shape: no longer a silent "accepted 0"
        b'[{"action": "PutObject"}, 7]',  # a batch holds only message bodies
        b"{}",
    ],
)
def test_a_body_that_is_not_an_event_document_is_400(s3, events_token, raw):
    response = post_events(None, token=events_token, raw=raw)
    assert response.status_code == 400
    body = response.json()
    assert body["error"]["code"] == "VALIDATION_ERROR" and set(body["error"]) == {"code", "message", "details"}


@pytest.mark.parametrize(
    "payload",
    [
        ({"Service": "Amazon S3", "Event": "s3:TestEvent", "Bucket": "x"}, []),
        ({"Records": []}, []),
        ({"Records": [{"eventName": "ObjectRestore:Completed", "s3": {}}]}, ["skipped"]),
        ({"Records": [{"no": "shape"}, 7]}, ["malformed", "malformed"]),
        ([], []),
    ],
)
def test_test_events_and_records_not_acted_on_are_accepted_and_ignored(s3, events_token, payload):
    payload, outcomes = payload
    response = post_events(payload, token=events_token)
    assert response.status_code == 202
    body = response.json()
    assert body["accepted"] == 0 and body["unknown"] == 0
    assert body["results"] == [{"index": i, "outcome": o, "retry": False} for i, o in enumerate(outcomes)]
    assert not StorageEvent.objects.exists()


# --- the ladder -----------------------------------------------------------------


def test_unknown_key_object_is_deleted_and_no_row_is_made(s3, events_token, django_capture_on_commit_callbacks):
    key = f"tenants/acme/image/{uuid.uuid4()}"
    s3.put(key, b"GIF89a nobody asked for this")
    with django_capture_on_commit_callbacks(execute=True):
        response = post_events(event_for(s3, key), token=events_token)
    assert response.status_code == 202 and response.json()["accepted"] == 1
    assert not s3.exists(key)
    assert not Attachment.objects.filter(storage_key=key).exists()
    assert StorageEvent.objects.get(key=key).outcome == "unknown_key"


def test_our_own_writes_are_never_treated_as_unknown(s3, events_token, django_capture_on_commit_callbacks):
    owned = [f"tenants/acme/derivatives/{uuid.uuid4()}/thumbnail.webp", f"quarantine/tenants/acme/image/{uuid.uuid4()}"]
    for key in owned:
        s3.put(key, b"ours")
    with django_capture_on_commit_callbacks(execute=True):
        response = post_events({"Records": [event_for(s3, k)["Records"][0] for k in owned]}, token=events_token)
    assert response.json()["accepted"] == 2
    assert all(s3.exists(k) for k in owned)


def test_events_for_another_bucket_never_touch_ours(s3, events_token, django_capture_on_commit_callbacks):
    key = f"tenants/acme/image/{uuid.uuid4()}"
    s3.put(key, b"same key, other bucket's event")
    with django_capture_on_commit_callbacks(execute=True):
        response = post_events(
            {"Records": [s3_record("someone-elses-bucket", key, size=5, etag="e")]}, token=events_token
        )
    assert response.status_code == 202
    assert s3.exists(key) and not StorageEvent.objects.exists()


def test_keys_are_url_decoded(s3, events_token, alice, api):
    row = _uploaded(s3, api(alice), jpeg_bytes())
    record = s3_record(s3.bucket, row.storage_key, size=10, etag="abc")
    assert "%2F" in record["s3"]["object"]["key"]
    assert post_events({"Records": [record]}, token=events_token).json()["accepted"] == 1
    assert StorageEvent.objects.get().attachment_id == row.pk


def test_oversize_object_is_rejected_too_large_and_quarantined(s3, events_token, alice, api, settings):
    # PUT cannot bound the body (and moto ignores a POST policy): intake believes HEAD.
    settings.AIRLOCK_S3_UPLOAD_METHOD = "PUT"
    settings.AIRLOCK_PROFILES = {
        **settings.AIRLOCK_PROFILES,
        "image": {**settings.AIRLOCK_PROFILES["image"], "max_bytes": 2000},
    }
    from attachments.storage import reset_gateway

    reset_gateway()
    data = jpeg_bytes((64, 64))
    created = intent(api(alice), data[:1500], filename="small.jpg", content_type="image/jpeg")
    big = data + b"\x00" * (3000 - len(data)) if len(data) < 3000 else data
    assert send_upload(created["upload"], big).status_code == 200  # more than declared, more than max
    row = Attachment.objects.get(pk=created["id"])

    response = post_events(event_for(s3, row.storage_key), token=events_token)
    assert response.status_code == 202
    assert StorageEvent.objects.get(key=row.storage_key).size == len(big)
    assert run_pipeline(row.pk) == "rejected"
    row.refresh_from_db()
    assert row.reason_code == "too_large"
    assert row.quarantine_key == f"quarantine/{row.storage_key}"
    assert not s3.exists(row.storage_key) and s3.get(row.quarantine_key) == big


def test_wrong_sniffed_type_is_rejected_and_quarantined(s3, events_token, alice, api):
    data = pdf_bytes()
    row = _uploaded(s3, api(alice), data, filename="cat.jpg", content_type="image/jpeg")
    assert post_events(event_for(s3, row.storage_key), token=events_token).status_code == 202
    assert run_pipeline(row.pk) == "rejected"
    row.refresh_from_db()
    assert row.reason_code == "type_not_allowed"
    assert not s3.exists(row.storage_key) and s3.get(row.quarantine_key) == data


def test_quarantine_copy_and_delete_events_that_follow_change_nothing(
    s3, events_token, alice, api, django_capture_on_commit_callbacks
):
    row = _uploaded(s3, api(alice), pdf_bytes(), filename="x.jpg", content_type="image/jpeg")
    post_events(event_for(s3, row.storage_key), token=events_token)
    assert run_pipeline(row.pk) == "rejected"
    row.refresh_from_db()
    copied = event_for(s3, row.quarantine_key, name="ObjectCreated:Copy")
    removed = {"Records": [s3_record(s3.bucket, row.storage_key, name="ObjectRemoved:Delete", sequencer="0A")]}
    with django_capture_on_commit_callbacks(execute=True):
        assert post_events(copied, token=events_token).json()["accepted"] == 1
        assert post_events(removed, token=events_token).json()["accepted"] == 1
    assert s3.exists(row.quarantine_key)
    row.refresh_from_db()
    assert (row.status, row.reason_code) == ("rejected", "type_not_allowed")


def test_a_duplicate_event_makes_one_job(s3, events_token, alice, api):
    row = _uploaded(s3, api(alice), jpeg_bytes())
    event = event_for(s3, row.storage_key, sequencer="0055AED6DCD90281E5")
    for _ in range(3):
        assert post_events(event, token=events_token).json()["accepted"] == 1
    assert StorageEvent.objects.filter(key=row.storage_key).count() == 1
    assert _intake_jobs(row) == 1
    # The same event in one document twice, and from another transport: still one.
    assert post_events({"Records": event["Records"] * 2}, token=events_token).json()["accepted"] == 2
    assert _intake_jobs(row) == 1
    assert run_pipeline(row.pk) == "ready"
    assert post_events(event, token=events_token).status_code == 202
    assert _intake_jobs(row) == 1


def test_a_stale_remove_delivered_before_the_create_is_harmless(s3, events_token, alice, api):
    row = _uploaded(s3, api(alice), jpeg_bytes())
    removed = {"Records": [s3_record(s3.bucket, row.storage_key, name="ObjectRemoved:Delete", sequencer="01")]}
    assert post_events(removed, token=events_token).json()["accepted"] == 1
    assert post_events(event_for(s3, row.storage_key, sequencer="02"), token=events_token).status_code == 202
    assert StorageEvent.objects.get(event_name="ObjectRemoved:Delete").outcome == "ignored"
    # An older remove arriving after the create (the row now has bytes): storage still has it.
    older = {"Records": [s3_record(s3.bucket, row.storage_key, name="ObjectRemoved:Delete", sequencer="00")]}
    assert post_events(older, token=events_token).status_code == 202
    assert (
        StorageEvent.objects.get(event_name="ObjectRemoved:Delete", dedupe_key__contains="#00#").outcome
        == "still_present"
    )
    assert run_pipeline(row.pk) == "ready"


def test_create_then_delete_delivered_in_reverse_leaves_the_intent_waiting(
    s3, events_token, alice, api, django_capture_on_commit_callbacks
):
    # Once the object is gone a late create cannot be told from a forged one: neither
    # ends the intent (no object_missing); it waits for bytes, or expires like any other.
    row = _uploaded(s3, api(alice), jpeg_bytes())
    created = event_for(s3, row.storage_key, sequencer="01")
    s3.delete(row.storage_key)
    removed = {"Records": [s3_record(s3.bucket, row.storage_key, name="ObjectRemoved:Delete", sequencer="02")]}
    with django_capture_on_commit_callbacks(execute=True):
        assert post_events(removed, token=events_token).status_code == 202
        assert post_events(created, token=events_token).status_code == 202
    row.refresh_from_db()
    assert (row.status, row.uploaded_at, row.reason_code) == ("pending", None, "")
    assert not OutboxMessage.objects.filter(actor_name="intake").exists()


def test_remove_during_processing_rejects_object_missing(s3, events_token, alice, api):
    row = _uploaded(s3, api(alice), jpeg_bytes())
    assert post_events(event_for(s3, row.storage_key), token=events_token).status_code == 202
    token = attachment_begin(attachment_id=row.pk)
    assert token is not None
    s3.delete(row.storage_key)
    removed = {"Records": [s3_record(s3.bucket, row.storage_key, name="ObjectRemoved:Delete", sequencer="03")]}
    assert post_events(removed, token=events_token).json()["accepted"] == 1
    row.refresh_from_db()
    assert (row.status, row.reason_code) == ("rejected", "object_missing")
    log = TransitionLog.objects.filter(attachment=row).last()
    assert (log.transition, log.from_status, log.actor) == ("reject", "processing", "storage-events")
    assert pipeline.run_stage(row.pk, token, "intake") == "stale"  # the worker's job lost its lease
    assert StorageEvent.objects.get(event_name="ObjectRemoved:Delete").outcome == "object_missing"


def test_remove_of_a_pending_upload_with_bytes_rejects_it(s3, events_token, alice, api):
    row = _uploaded(s3, api(alice), jpeg_bytes())
    assert post_events(event_for(s3, row.storage_key), token=events_token).status_code == 202
    s3.delete(row.storage_key)
    removed = {"Records": [s3_record(s3.bucket, row.storage_key, name="ObjectRemoved:Delete", sequencer="04")]}
    post_events(removed, token=events_token)
    row.refresh_from_db()
    assert (row.status, row.reason_code) == ("rejected", "object_missing")
    assert run_pipeline(row.pk) == "rejected"


def test_remove_of_a_ready_attachment_changes_nothing(s3, events_token, alice, api):
    row = _uploaded(s3, api(alice), jpeg_bytes())
    post_events(event_for(s3, row.storage_key), token=events_token)
    assert run_pipeline(row.pk) == "ready"
    removed = {"Records": [s3_record(s3.bucket, row.storage_key, name="ObjectRemoved:Delete", sequencer="05")]}
    assert post_events(removed, token=events_token).status_code == 202
    row.refresh_from_db()
    assert row.status == "ready"


def test_an_oversized_event_document_is_413(s3, events_token, settings):
    raw = b'{"Records": [], "padding": "' + b"x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 10) + b'"}'
    response = post_events(None, token=events_token, raw=raw)
    assert response.status_code == 413 and response.json()["error"]["code"] == "TOO_LARGE"


@pytest.mark.parametrize("field", ["eventName", "versionId", "key"])
def test_nul_bytes_in_an_event_are_malformed_not_a_server_error(s3, events_token, field):
    from tests.s3.support import post_events, s3_record

    record = s3_record(s3.bucket, "tenants/acme/image/" + str(uuid.uuid4()))
    if field == "eventName":
        record["eventName"] = "ObjectCreated:Put\x00"
    elif field == "versionId":
        record["s3"]["object"]["versionId"] = "v\x001"
    else:
        record["s3"]["object"]["key"] = "tenants/acme/image/a%00b"
    response = post_events({"Records": [record]}, token=events_token)
    assert response.status_code == 202 and response.json()["accepted"] == 0
