"""Rescans without hiding (issue #28 item 6, #29 item 5).

Every scan records the signature version it judged with. A rescan keeps the
file ready and served while its stored object is scanned again; only a new hit
takes it down (rejected/malware, quarantined, attachment.rejected webhook, a
metric). The background walk starts when the version in force changes (here: a
YARA rule added at runtime) and queues ready files newest first within
AIRLOCK_RESCAN_FILES_PER_MINUTE, from a checkpoint.
"""

from __future__ import annotations

import shutil
import uuid
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from attachments.models import Attachment, OutboxMessage, RescanCheckpoint, Status, TransitionLog
from attachments.rescan.services import RESTART_AFTER
from attachments.storage import get_gateway
from processing import actors
from processing.metrics import RESCAN_OUTCOMES
from processing.rescan import jobs as rescans
from processing.scanners import yara as yara_module
from tests.support import EICAR, jpeg_bytes, run_pipeline, upload

pytestmark = pytest.mark.django_db

SHIPPED_RULES = Path(yara_module.DEFAULT_RULES_DIR)


@pytest.fixture
def rules_dir(settings, tmp_path) -> Path:
    """The shipped YARA rules in a directory of this test's own, so a test can add a signature."""
    rules = tmp_path / "rules"
    shutil.copytree(SHIPPED_RULES, rules)
    settings.AIRLOCK_YARA_RULES_DIR = rules
    return rules


def _add_rule(rules: Path, name: str, condition: str) -> None:
    (rules / f"{name.lower()}.yar").write_text(f"rule {name}\n{{\n    condition:\n        {condition}\n}}\n")


def _committed_photos(alice, api, n: int) -> list[str]:
    ids = [upload(api(alice), jpeg_bytes((64 + 16 * i, 48))) for i in range(n)]
    for attachment_id in ids:
        assert run_pipeline(attachment_id) == "ready"
    response = api(alice).post("/api/v1/attachments/commit", {"ids": ids, "ref": "ad:42"}, format="json")
    assert response.status_code == 200, response.content
    return ids


def _readable(api, user, attachment_id) -> int:
    return api(user).get(f"/api/v1/attachments/{attachment_id}/download").status_code


def _run_queued_rescans() -> list[str]:
    """Run every rescan job the outbox holds, as the actor would; the ids, in the order queued."""
    ran = []
    for message in OutboxMessage.objects.filter(actor_name="rescan").order_by("pk"):
        actors.rescan.fn(*message.args)
        ran.append(message.args[0])
        message.delete()
    return ran


def _walk(now) -> int:
    """Two ticks a minute apart: the first notices the new version, the second has a minute of budget."""
    rescans.rescan_tick(now=now)
    return rescans.rescan_tick(now=now + timedelta(minutes=1))


def test_every_scan_records_its_signature_version_on_the_row_and_in_the_audit(alice, api, rules_dir):
    attachment_id = upload(api(alice), jpeg_bytes())
    assert run_pipeline(attachment_id) == "ready"
    row = Attachment.objects.get(pk=attachment_id)
    in_force = rescans.signatures_in_force()
    assert row.scan_signatures == in_force and row.scanned_at is not None
    assert "yara=yara:" in in_force
    finish = TransitionLog.objects.get(attachment_id=attachment_id, transition="finish")
    assert finish.message == f"scanned clean with {in_force}"

    _add_rule(rules_dir, "Nothing_Here", "filesize == 0 and filesize == 1")
    assert rescans.signatures_in_force() != in_force  # a new rule is a new version


def test_committed_photos_stay_readable_by_another_user_throughout_a_rescan(alice, bob, api, rules_dir, monkeypatch):
    """The issue's story: `backfill --rescan --profile image` hid five committed photos from bob."""
    ids = _committed_photos(alice, api, 5)
    assert {_readable(api, bob, i) for i in ids} == {200}

    out = StringIO()
    call_command("backfill", "--rescan", "--profile", "image", "--no-progress", stdout=out, stderr=StringIO())
    assert set(Attachment.objects.filter(pk__in=ids).values_list("status", flat=True)) == {Status.READY}
    assert {_readable(api, bob, i) for i in ids} == {200}
    assert "flagged 5 ready files" in out.getvalue()

    # Reads while the scanner is at work on each file: still served.
    seen_during: list[int] = []
    real_scan_all = rescans.scan_all

    def scan_all_while_bob_reads(scanners, open_chunks):
        seen_during.extend(_readable(api, bob, i) for i in ids)
        return real_scan_all(scanners, open_chunks)

    monkeypatch.setattr(rescans, "scan_all", scan_all_while_bob_reads)
    assert _walk(timezone.now()) == 5
    assert len(_run_queued_rescans()) == 5
    assert seen_during and set(seen_during) == {200}

    in_force = rescans.signatures_in_force()
    for row in Attachment.objects.filter(pk__in=ids):
        assert (row.status, row.scan_signatures, row.rescan_requested_at) == (Status.READY, in_force, None)
    assert (
        TransitionLog.objects.filter(
            attachment_id__in=ids, transition="rescan", message=f"rescanned clean with {in_force}"
        ).count()
        == 5
    )
    assert not TransitionLog.objects.filter(attachment_id__in=ids, to_status=Status.PENDING).exists()
    assert {_readable(api, bob, i) for i in ids} == {200}


def _webhook_endpoint(tenant):
    from webhooks.models import WebhookEndpoint
    from webhooks.services.endpoints import forget

    WebhookEndpoint.objects.create(tenant=tenant, url="https://hooks.example/airlock", event_types=[])
    forget()  # the process's endpoint cache learns of it


def _rejected_webhooks(attachment_id) -> int:
    from webhooks.models import WebhookDelivery, WebhookEvent

    events = WebhookEvent.objects.filter(type="attachment.rejected", attachment_id=attachment_id)
    return WebhookDelivery.objects.filter(event__in=events).count()


def test_a_new_yara_signature_takes_down_only_the_file_it_matches(alice, bob, api, rules_dir):
    ids = _committed_photos(alice, api, 3)
    hit, *clean = ids
    size = Attachment.objects.get(pk=hit).stored_size
    assert size not in set(Attachment.objects.filter(pk__in=clean).values_list("stored_size", flat=True))
    _webhook_endpoint(Attachment.objects.get(pk=hit).tenant)
    before = RESCAN_OUTCOMES.labels(outcome="rejected")._value.get()

    _add_rule(rules_dir, "New_Photo_Signature", f"filesize == {size}")
    assert _walk(timezone.now()) == 3
    _run_queued_rescans()

    row = Attachment.objects.get(pk=hit)
    assert (row.status, row.reason_code, row.reason_message) == ("rejected", "malware", "yara: New_Photo_Signature")
    assert row.quarantine_key and get_gateway().head(row.quarantine_key) is not None
    audit = TransitionLog.objects.get(attachment_id=hit, transition="reject_on_rescan")
    assert (audit.from_status, audit.to_status, audit.actor) == ("ready", "rejected", "system:rescan")
    assert audit.message.startswith("rescan with ") and "New_Photo_Signature" in audit.message
    assert _rejected_webhooks(hit) == 1
    assert RESCAN_OUTCOMES.labels(outcome="rejected")._value.get() == before + 1
    assert _readable(api, bob, hit) == 404 and _readable(api, alice, hit) == 404
    assert {_readable(api, bob, i) for i in clean} == {200}
    assert set(Attachment.objects.filter(pk__in=clean).values_list("status", flat=True)) == {"ready"}
    assert not any(_rejected_webhooks(i) for i in clean)
    # The tenant's usage counter followed the takedown, as it follows any rejection.
    from attachments.models import TenantUsage
    from attachments.services.quotas import usage_recounted

    usage = TenantUsage.objects.get(tenant_id=row.tenant_id)
    assert (usage.bytes_used, usage.files_used) == usage_recounted(row.tenant_id)


def _ready_row_holding(alice, data: bytes, *, signatures: str = "yara=yara:0000000000000000") -> Attachment:
    """A ready, committed file judged clean by older signatures, whose stored bytes are `data`."""
    from tests.sweeper.support import make_attachment

    row = make_attachment(
        alice,
        created_at=timezone.now(),
        lifecycle="committed",
        scan_signatures=signatures,
        stored_size=len(data),
        size=len(data),
        content_type="image/jpeg",
    )
    get_gateway().write_chunks(row.storage_key, [data])
    return row


def test_an_eicar_test_signature_hit_during_rescan_takes_the_file_down_with_the_webhook(alice, bob, api):
    """Both scanners know the EICAR test file (clamd in the real run, YARA's shipped rule everywhere)."""
    row = _ready_row_holding(alice, EICAR)
    _webhook_endpoint(row.tenant)
    assert _readable(api, bob, row.pk) == 200

    assert rescans.rescan_one(row.pk) == "rejected"

    row.refresh_from_db()
    assert (row.status, row.reason_code) == ("rejected", "malware")
    assert "EICAR" in row.reason_message.upper()
    assert row.scan_signatures == rescans.signatures_in_force()
    assert _rejected_webhooks(row.pk) == 1
    assert _readable(api, bob, row.pk) == 404


def test_an_infrastructure_failure_leaves_the_file_ready_and_it_is_retried_later(alice, bob, api, monkeypatch):
    from processing.scanners import ScannerError

    row = _ready_row_holding(alice, jpeg_bytes())
    old = row.scan_signatures

    def scanner_down(scanners, open_chunks):
        raise ScannerError("clamd unreachable at unix:/nowhere")

    monkeypatch.setattr(rescans, "scan_all", scanner_down)
    now = timezone.now()
    assert _walk(now) == 1
    assert _run_queued_rescans() == [str(row.pk)]
    row.refresh_from_db()
    assert (row.status, row.scan_signatures) == ("ready", old)
    assert _readable(api, bob, row.pk) == 200
    assert RescanCheckpoint.objects.get().finished_at is not None

    # The walk reached its end; after RESTART_AFTER it comes back for what is still outdated.
    monkeypatch.undo()
    assert rescans.rescan_tick(now=now + timedelta(minutes=2)) == 0
    assert rescans.rescan_tick(now=now + RESTART_AFTER + timedelta(minutes=2)) == 1
    _run_queued_rescans()
    row.refresh_from_db()
    assert (row.status, row.scan_signatures) == ("ready", rescans.signatures_in_force())


def test_the_walk_goes_newest_first_within_its_budget_and_resumes_from_its_checkpoint(alice, settings):
    from tests.sweeper.support import make_attachment

    settings.AIRLOCK_RATE_LIMITS = settings.AIRLOCK_RATE_LIMITS.replace(rescan_files_per_minute=3)
    now = timezone.now()
    rows = [
        make_attachment(alice, created_at=now - timedelta(hours=i), lifecycle="committed", scan_signatures="yara=old")
        for i in range(7)
    ]
    newest_first = [str(r.pk) for r in rows]

    assert rescans.rescan_tick(now=now) == 0  # the walk starts; no budget spent yet
    assert rescans.rescan_tick(now=now + timedelta(seconds=20)) == 1  # 3 a minute: one per 20 s
    assert rescans.rescan_tick(now=now + timedelta(seconds=30)) == 0
    assert rescans.rescan_tick(now=now + timedelta(minutes=10)) == 3  # at most one minute's budget at once
    queued = list(OutboxMessage.objects.filter(actor_name="rescan").order_by("pk").values_list("args", flat=True))
    assert [args[0] for args in queued] == newest_first[:4]
    checkpoint = RescanCheckpoint.objects.get()
    assert (str(checkpoint.cursor_id), checkpoint.queued) == (newest_first[3], 4)

    # A restart (a new process) resumes after the checkpoint: nothing is queued twice.
    assert rescans.rescan_tick(now=now + timedelta(minutes=20)) == 3
    assert rescans.rescan_tick(now=now + timedelta(minutes=30)) == 0
    queued = list(OutboxMessage.objects.filter(actor_name="rescan").order_by("pk").values_list("args", flat=True))
    assert [args[0] for args in queued] == newest_first
    assert RescanCheckpoint.objects.get().finished_at is not None


def test_the_walk_waits_while_uploads_wait(alice, settings):
    """Fair: rescans are queued only when no uploaded file waits for the pipeline."""
    from tests.sweeper.support import make_attachment

    now = timezone.now()
    make_attachment(alice, created_at=now, lifecycle="committed", scan_signatures="yara=old")
    waiting = make_attachment(alice, created_at=now, status=Status.PENDING, uploaded_at=now)
    rescans.rescan_tick(now=now)
    assert rescans.rescan_tick(now=now + timedelta(minutes=1)) == 0
    Attachment.objects.filter(pk=waiting.pk).update(status=Status.READY, scan_signatures=rescans.signatures_in_force())
    assert rescans.rescan_tick(now=now + timedelta(minutes=2)) == 1


def test_rescan_jobs_run_after_upload_steps(settings):
    assert actors.rescan.queue_name == "rescan"
    assert actors.rescan.priority > max(actors.intake.priority, actors.scan.priority, actors.derive.priority)
    settings.AIRLOCK_RATE_LIMITS = settings.AIRLOCK_RATE_LIMITS.replace(rescan_files_per_minute=0)
    assert rescans.rescan_tick() == 0


def test_a_malformed_rescan_message_is_dead_lettered():
    from attachments.models import DeadLetter

    actors.rescan.fn("not-a-uuid")
    assert DeadLetter.objects.get().payload["actor"] == "rescan"
    assert rescans.rescan_one(uuid.uuid4()) == "skipped"


def test_a_worker_says_at_boot_when_the_signatures_in_force_are_not_the_walks(caplog, rules_dir):
    RescanCheckpoint.objects.create(version="clamd=ClamAV 0.1;yara=yara:0000000000000000")
    with caplog.at_level("INFO", logger="airlock.rescan"):
        assert rescans.note_signatures_at_boot() == rescans.signatures_in_force()
    assert any("differ from the last rescan walk" in r.getMessage() for r in caplog.records)
    RescanCheckpoint.objects.update(version=rescans.signatures_in_force())
    caplog.clear()
    with caplog.at_level("INFO", logger="airlock.rescan"):
        rescans.note_signatures_at_boot()
    assert not any("differ" in r.getMessage() for r in caplog.records)
