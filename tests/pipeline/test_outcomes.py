"""The pipeline slice: intake believes storage and bytes, scanning fails closed, one flip to ready."""

import hashlib
import threading
import uuid

import pytest
from django.db import connection

from attachments.models import Attachment, DeadLetter, TransitionLog
from attachments.services.audit import AUDIT_EVENTS
from attachments.storage import get_gateway
from processing import pipeline
from tests.support import EICAR, jpeg_bytes, pdf_bytes, png_bytes, run_pipeline, upload, zip_bytes

pytestmark = pytest.mark.django_db


def test_jpeg_becomes_ready_with_facts_from_the_bytes(alice, api):
    attachment_id = upload(api(alice), jpeg_bytes((640, 480)))
    assert run_pipeline(attachment_id) == "ready"
    row = Attachment.objects.get(pk=attachment_id)
    assert row.content_type == "image/jpeg"
    assert row.metadata["width"] == 640 and row.metadata["height"] == 480
    served = b"".join(get_gateway().iter_chunks(row.served_key))
    assert row.size == len(served) and row.sha256 == hashlib.sha256(served).hexdigest()
    assert row.derivatives.filter(kind="thumbnail").exists()
    assert [(t.from_status, t.to_status) for t in row.transitions.exclude(transition__in=AUDIT_EVENTS)] == [
        ("pending", "processing"),
        ("processing", "ready"),
    ]


def test_declared_type_is_ignored_detected_type_decides(alice, api):
    # Declared as JPEG, really a PNG: allowed in the profile, so it is served as PNG.
    attachment_id = upload(api(alice), png_bytes(), content_type="image/jpeg")
    assert run_pipeline(attachment_id) == "ready"
    assert Attachment.objects.get(pk=attachment_id).content_type == "image/png"


def test_bytes_of_a_type_outside_the_profile_are_rejected_and_quarantined(alice, api):
    attachment_id = upload(api(alice), pdf_bytes(), content_type="image/jpeg")
    assert run_pipeline(attachment_id) == "rejected"
    row = Attachment.objects.get(pk=attachment_id)
    assert row.reason_code == "type_not_allowed"
    assert get_gateway().head(row.storage_key) is None
    assert row.quarantine_key == f"quarantine/{row.storage_key}"
    assert get_gateway().head(row.quarantine_key) is not None


def test_text_pretending_to_be_an_image_is_rejected(alice, api):
    attachment_id = upload(api(alice), b"<html><script>alert(1)</script></html>")
    assert run_pipeline(attachment_id) == "rejected"
    assert Attachment.objects.get(pk=attachment_id).reason_code == "type_not_allowed"


@pytest.mark.parametrize("profile", ["image", "document", "archive"])
def test_eicar_is_rejected_as_malware_whatever_the_profile(alice, api, profile):
    attachment_id = upload(
        api(alice),
        EICAR,
        filename="eicar.com",
        profile=profile,
        content_type={"image": "image/png", "document": "application/pdf", "archive": "application/zip"}[profile],
    )
    assert run_pipeline(attachment_id) == "rejected"
    row = Attachment.objects.get(pk=attachment_id)
    assert row.reason_code == "malware" and "EICAR" in row.reason_message.upper()


def test_malware_verdict_stops_an_allowed_file(alice, api, monkeypatch):
    from processing.scanners import Verdict

    monkeypatch.setattr(
        "processing.scanners.scan_all", lambda scanners, open_chunks, **_: [Verdict("yara", "infected", "Test_Rule")]
    )
    attachment_id = upload(api(alice), png_bytes())
    assert run_pipeline(attachment_id) == "rejected"
    row = Attachment.objects.get(pk=attachment_id)
    assert (row.reason_code, row.reason_message) == ("malware", "yara: Test_Rule")


def test_stored_size_over_the_profile_limit_is_rejected_at_intake(alice, api, settings):
    attachment_id = upload(api(alice), jpeg_bytes((200, 200)))
    settings.AIRLOCK_PROFILES = {
        **settings.AIRLOCK_PROFILES,
        "image": {**settings.AIRLOCK_PROFILES["image"], "max_bytes": 100},
    }
    assert run_pipeline(attachment_id) == "rejected"
    assert Attachment.objects.get(pk=attachment_id).reason_code == "too_large"


def test_missing_object_is_rejected_object_missing(alice, api):
    attachment_id = upload(api(alice), jpeg_bytes())
    get_gateway().delete(Attachment.objects.get(pk=attachment_id).storage_key)
    assert run_pipeline(attachment_id) == "rejected"
    assert Attachment.objects.get(pk=attachment_id).reason_code == "object_missing"


def test_pdf_and_zip_reach_ready(alice, api):
    client = api(alice)
    pdf_id = upload(client, pdf_bytes(), profile="document", filename="a.pdf", content_type="application/pdf")
    zip_id = upload(client, zip_bytes(), profile="archive", filename="a.zip", content_type="application/zip")
    assert run_pipeline(pdf_id) == "ready"
    assert run_pipeline(zip_id) == "ready"
    assert Attachment.objects.get(pk=pdf_id).metadata["page_count"] == 1
    assert Attachment.objects.get(pk=zip_id).metadata["entries"] == 1


def test_duplicate_messages_change_nothing(alice, api):
    attachment_id = upload(api(alice), jpeg_bytes())
    assert run_pipeline(attachment_id) == "ready"
    # Replayed jobs: a second intake and a stale step with an old token.
    assert pipeline.start_and_intake(uuid.UUID(attachment_id)) == "skipped"
    assert pipeline.run_stage(uuid.UUID(attachment_id), uuid.uuid4(), "derive") == "stale"
    assert TransitionLog.objects.filter(attachment_id=attachment_id).exclude(transition__in=AUDIT_EVENTS).count() == 2
    # and no second arrival or scan on the timeline
    assert TransitionLog.objects.filter(attachment_id=attachment_id, transition__in=AUDIT_EVENTS).count() == 3


def test_duplicate_storage_event_is_recorded_once(alice, api):
    from attachments.uploads.services.uploads import object_arrived

    attachment_id = upload(api(alice), jpeg_bytes())
    key = Attachment.objects.get(pk=attachment_id).storage_key
    again = object_arrived(key=key, size=None, source="local", dedupe_key=f"local:{key}", event_name="x")
    assert again.outcome == "duplicate"


def test_object_at_a_key_nobody_issued_is_deleted_and_never_processed(alice, django_capture_on_commit_callbacks):
    from attachments.uploads.services.uploads import object_arrived

    key = "tenants/acme/image/" + str(uuid.uuid4())
    get_gateway().write_chunks(key, [b"GIF89a rogue"])
    with django_capture_on_commit_callbacks(execute=True):
        arrival = object_arrived(key=key, size=12, source="webhook", dedupe_key=f"w:{key}", event_name="x")
    assert arrival.outcome == "unknown_key"
    assert get_gateway().head(key) is None
    assert not Attachment.objects.filter(storage_key=key).exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_workers_flip_exactly_once(alice, api):
    attachment_id = upload(api(alice), jpeg_bytes())
    outcomes = []
    barrier = threading.Barrier(4)

    def work():
        try:
            barrier.wait()
            outcomes.append(pipeline.start_and_intake(uuid.UUID(attachment_id)))
        finally:
            connection.close()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("advanced") == 1 and outcomes.count("skipped") == 3
    row = Attachment.objects.get(pk=attachment_id)
    tokens = []

    def step():
        try:
            barrier2.wait()
            tokens.append(pipeline.run_stage(row.pk, row.lease_token, row.step))
        finally:
            connection.close()

    barrier2 = threading.Barrier(3)
    threads = [threading.Thread(target=step) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert row.step == "derive"  # intake ran the scan
    assert tokens.count("ready") == 1 and tokens.count("stale") == 2
    assert TransitionLog.objects.filter(attachment_id=attachment_id, to_status="ready").count() == 1


def test_a_file_left_at_the_scan_stage_finishes_through_it(alice, api):
    """A row at "scan" with its scan job (sent before intake ran the scan) is scanned there, then derived."""
    from attachments.models import OutboxMessage

    attachment_id = upload(api(alice), jpeg_bytes((64, 48)))
    assert pipeline.start_and_intake(uuid.UUID(attachment_id)) == "advanced"
    Attachment.objects.filter(pk=attachment_id).update(step="scan", scanned_at=None, scan_signatures="")
    row = Attachment.objects.get(pk=attachment_id)
    derive_jobs = OutboxMessage.objects.filter(actor_name="derive", args__0=attachment_id).count()
    assert pipeline.run_stage(row.pk, row.lease_token, "scan") == "advanced"
    after = Attachment.objects.get(pk=attachment_id)
    assert (after.step, after.lease_token) == ("derive", row.lease_token)
    assert after.scanned_at is not None and after.scan_signatures
    assert OutboxMessage.objects.filter(actor_name="derive", args__0=attachment_id).count() == derive_jobs + 1
    assert pipeline.run_stage(row.pk, row.lease_token, "derive") == "ready"


def test_scanner_down_fails_closed_waits_and_recovers(alice, api, settings):
    """clamd unreachable: never ready, waiting without spending attempts; ready once it is back, with no human."""
    attachment_id = upload(api(alice), jpeg_bytes())
    real = (settings.CLAMD_SOCKET, settings.CLAMD_HOST, settings.CLAMD_PORT)
    settings.CLAMD_SOCKET, settings.CLAMD_HOST, settings.CLAMD_PORT = None, "127.0.0.1", 9  # nothing listens
    statuses = [run_pipeline(attachment_id) for _ in range(settings.AIRLOCK_RETRIES.max_attempts + 2)]
    assert statuses == ["pending"] * (settings.AIRLOCK_RETRIES.max_attempts + 2)
    row = Attachment.objects.get(pk=attachment_id)
    assert row.attempts == 0 and row.ready_at is None and row.reason_code in ("", None)
    assert not DeadLetter.objects.filter(attachment_id=attachment_id).exists()
    # One release row for the whole wait, counting its tries (services/audit.py dependency_waits_fold).
    [wait] = TransitionLog.objects.filter(attachment_id=attachment_id, transition="release")
    assert wait.details["waits"] == settings.AIRLOCK_RETRIES.max_attempts + 2
    assert "clamd" in wait.message
    settings.CLAMD_SOCKET, settings.CLAMD_HOST, settings.CLAMD_PORT = real
    assert run_pipeline(attachment_id) == "ready"


def test_discarded_while_processing_is_never_flipped_to_ready(alice, api):
    from attachments.services.lifecycle import attachment_discard

    attachment_id = upload(api(alice), jpeg_bytes())
    pipeline.start_and_intake(uuid.UUID(attachment_id))
    attachment_discard(user=alice, attachment_id=attachment_id)
    row = Attachment.objects.get(pk=attachment_id)
    assert pipeline.run_stage(row.pk, row.lease_token, row.step) == "stale"  # the derive step ends it
    assert Attachment.objects.get(pk=attachment_id).status == "rejected"
    row = Attachment.objects.get(pk=attachment_id)
    assert row.reason_code == "object_missing" and not row.derivatives.exists() and row.ready_at is None


def test_local_intake_starts_scans_and_queues_the_derive_in_one_transaction(alice, api):
    """Local uploads are write-once, so a clean intake (with its scan) is recorded with the lease: one commit."""
    from django.test.utils import CaptureQueriesContext

    from attachments.models import OutboxMessage

    attachment_id = upload(api(alice), jpeg_bytes((64, 48)))
    with CaptureQueriesContext(connection) as queries:
        assert pipeline.start_and_intake(uuid.UUID(attachment_id)) == "advanced"
    row = Attachment.objects.get(pk=attachment_id)
    assert (row.status, row.step, row.content_type, row.stored_size) == (
        "processing",
        "derive",
        "image/jpeg",
        row.stored_size,
    )
    assert row.stored_size and row.lease_token
    assert list(row.transitions.values_list("transition", flat=True)) == ["intent", "arrived", "scan", "start"]
    assert row.scanned_at and row.scan_signatures
    job = [attachment_id, str(row.lease_token), str(row.tenant_id), row.subject]  # tenant and subject ride along
    assert OutboxMessage.objects.filter(actor_name="derive", args=job).exists()
    statements = [
        q["sql"]
        for q in queries.captured_queries
        if not q["sql"].upper().startswith(("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE"))
    ]
    # read, lock, start (+ facts), audit rows (one INSERT), outbox row, mark sent (at once under the test
    # settings); intake and scan as two stages took 11
    assert len(statements) <= 6, statements


def test_a_rejected_intake_is_decided_once_under_a_lease(alice, api):
    attachment_id = upload(api(alice), pdf_bytes(), content_type="image/jpeg")
    assert pipeline.start_and_intake(uuid.UUID(attachment_id)) == "rejected"
    row = Attachment.objects.get(pk=attachment_id)
    assert (row.status, row.reason_code) == ("rejected", "type_not_allowed")
    assert list(row.transitions.values_list("transition", flat=True)) == ["intent", "start", "reject"]
    assert pipeline.start_and_intake(uuid.UUID(attachment_id)) == "skipped"


def test_the_scan_stage_hands_yara_the_local_file_and_yara_makes_no_copy(alice, api, monkeypatch):
    """The scan reads the file the pipeline already has (the spool copy, here local storage's own file)."""
    import types

    from processing.scanners import YaraScanner
    from processing.scanners import yara as yara_module

    def refused(*args, **kwargs):
        raise AssertionError("YARA wrote a temp copy of a file the pipeline had")

    # Every object would be spooled to a temp file if YARA collected it from the chunks.
    monkeypatch.setattr(yara_module, "SPOOL_THRESHOLD", 16)
    monkeypatch.setattr(yara_module, "tempfile", types.SimpleNamespace(NamedTemporaryFile=refused))
    given: list[object] = []
    real_scan = YaraScanner.scan

    def recording(self, chunks, *, path=None):
        given.append(path)
        return real_scan(self, chunks, path=path)

    monkeypatch.setattr(YaraScanner, "scan", recording)
    clean_id = upload(api(alice), png_bytes())
    assert run_pipeline(clean_id) == "ready"
    row = Attachment.objects.get(pk=clean_id)
    assert given == [get_gateway().local_path(row.storage_key)]
