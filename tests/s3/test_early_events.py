"""An ObjectCreated event for a key with no object yet (forged with the events token, or early) is ignored."""

from __future__ import annotations

import pytest

from attachments.models import Attachment, OutboxMessage, StorageEvent
from tests.s3.support import event_for, intent, post_events, s3_record, send_upload
from tests.support import jpeg_bytes, run_pipeline

pytestmark = [pytest.mark.s3, pytest.mark.django_db]


def test_a_create_event_before_the_object_does_not_end_the_intent(s3, events_token, alice, api):
    data = jpeg_bytes()
    created = intent(api(alice), data)
    row = Attachment.objects.get(pk=created["id"])
    # The same record storage will send later (same eTag/sequencer: the same dedupe key).
    forged = {"Records": [s3_record(s3.bucket, row.storage_key, size=len(data), sequencer="00AA")]}
    assert post_events(forged, token=events_token).status_code == 202

    row.refresh_from_db()
    assert (row.status, row.uploaded_at, row.reason_code) == ("pending", None, "")
    assert not OutboxMessage.objects.filter(actor_name="intake").exists()
    assert not StorageEvent.objects.filter(key=row.storage_key).exists()  # nothing recorded to dedupe against

    assert send_upload(created["upload"], data).status_code in (200, 201, 204)
    real = event_for(s3, row.storage_key, sequencer="00AA")
    assert post_events(real, token=events_token).status_code == 202
    assert StorageEvent.objects.get(key=row.storage_key).outcome == "started"
    assert run_pipeline(row.pk) == "ready"
