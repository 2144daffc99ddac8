"""On S3, intake takes a snapshot of the upload first; what it then reads must be in its narrow read.

A column the step's read (Attachment.objects.for_step()) leaves out is loaded on
first touch by a refresh: one more query, and a refresh in a worker thread.
Local storage never takes the snapshot, so tests/pipeline/test_statement_counts.py
cannot see this path.
"""

from __future__ import annotations

import pytest

from attachments.models import Attachment
from processing import actors, tenant_slots
from processing.tenant_slots import MemorySlots
from tests.s3.support import event_for, intent, post_events, send_upload
from tests.support import jpeg_bytes, run_remaining_stages

pytestmark = [pytest.mark.s3, pytest.mark.django_db]


def test_intake_on_s3_reads_no_column_its_read_left_out(s3, alice, api, events_token, monkeypatch):
    monkeypatch.setattr(tenant_slots.backend, "value", MemorySlots())
    data = jpeg_bytes((64, 48))
    created = intent(api(alice), data, filename="cat.jpg", content_type="image/jpeg")
    assert send_upload(created["upload"], data).status_code in (200, 201, 204)
    row = Attachment.objects.get(pk=created["id"])
    assert post_events(event_for(s3, row.storage_key), token=events_token).status_code == 202
    row = Attachment.objects.get(pk=created["id"])
    assert row.status == "pending"
    loaded: list[str] = []
    refresh = Attachment.refresh_from_db

    def noting(self, *args, fields=None, **kwargs):
        loaded.extend(fields or ["*"])
        return refresh(self, *args, fields=fields, **kwargs)

    monkeypatch.setattr(Attachment, "refresh_from_db", noting)
    actors.intake.fn(str(row.pk), str(row.tenant_id), row.subject)
    after = Attachment.objects.get(pk=row.pk)
    assert after.content_key and after.step == "derive"  # the snapshot was taken, and intake (with its scan) went on
    assert after.scanned_at is not None
    assert loaded == []
    monkeypatch.setattr(Attachment, "refresh_from_db", refresh)
    assert run_remaining_stages(after.pk) == "ready"
