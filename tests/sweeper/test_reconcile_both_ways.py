"""Reconcile from the rows' side: a ready file whose original is gone fails, one whose derivatives are gone
has them made again, all under the brakes (local storage; tests/s3/test_reconcile_s3.py runs it on S3)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from attachments.models import Attachment, Derivative, OutboxMessage, Status, TransitionLog
from attachments.storage import get_gateway
from processing import pipeline
from sweeper.control import sweeper_control_set
from sweeper.reconcile import reconcile_storage
from tests.support import client_for, jpeg_bytes, run_pipeline, upload

pytestmark = pytest.mark.django_db


def _ready_image(user) -> Attachment:
    attachment_id = upload(client_for(user), jpeg_bytes())
    assert run_pipeline(attachment_id) == "ready"
    return Attachment.objects.get(pk=attachment_id)


def _derivative(attachment: Attachment) -> Derivative:
    return Derivative.objects.filter(attachment=attachment).order_by("kind").first()


def _exists(key: str) -> bool:
    return get_gateway().head(key) is not None


@pytest.fixture
def endpoint(alice):
    """A webhook endpoint for alice's tenant, so a failure becomes an event."""
    from webhooks.models import WebhookEndpoint
    from webhooks.services.endpoints import forget

    made = WebhookEndpoint.objects.create(
        tenant=alice.membership.tenant, url="https://hooks.example.com/airlock", event_types=[]
    )
    forget()
    yield made
    forget()


@pytest.fixture
def drift(alice):
    """Three ready images: one lost its original, one lost a derivative, one is whole."""
    lost, thinned, whole = _ready_image(alice), _ready_image(alice), _ready_image(alice)
    assert _derivative(thinned) is not None, "the image profile makes derivatives"
    get_gateway().delete(lost.working_key)
    get_gateway().delete(_derivative(thinned).storage_key)
    return lost, thinned, whole


def _statuses(*rows: Attachment) -> list[tuple[str, str]]:
    return [tuple(Attachment.objects.filter(pk=r.pk).values_list("status", "reason_code").get()) for r in rows]


def test_a_dry_run_reports_the_missing_objects_and_changes_nothing(drift):
    lost, thinned, whole = drift
    outbox_before = OutboxMessage.objects.count()

    report = reconcile_storage(dry_run=True)

    counts = report.counts()
    assert (counts["missing_originals"], counts["missing_derivatives"]) == (1, 1)
    assert (counts["missing_originals_failed"], counts["missing_derivatives_regenerated"]) == (0, 0)
    found = {(f.kind, f.attachment_id, f.action) for f in report.findings if f.kind.startswith("missing")}
    assert found == {
        ("missing_original", str(lost.pk), "would_fail"),
        ("missing_derivative", str(thinned.pk), "would_regenerate"),
    }
    assert _statuses(lost, thinned, whole) == [("ready", "")] * 3
    assert OutboxMessage.objects.count() == outbox_before
    assert not _exists(_derivative(thinned).storage_key)
    assert report.rows_checked == 3


def test_a_lost_original_fails_the_file_with_a_webhook_and_the_admin_finds_it(drift, endpoint, make_user, client):
    from webhooks.models import WebhookEvent

    lost, thinned, whole = drift
    report = reconcile_storage()

    assert report.counts()["missing_originals_failed"] == 1
    assert _statuses(lost, whole) == [("failed", "object_missing"), ("ready", "")]
    log = TransitionLog.objects.filter(attachment=lost).latest("id")
    assert (log.transition, log.from_status, log.to_status, log.actor) == (
        "lose",
        "ready",
        "failed",
        "system:reconcile",
    )
    assert list(WebhookEvent.objects.filter(attachment_id=lost.pk).values_list("type", flat=True)) == [
        "attachment.failed"
    ]
    assert not WebhookEvent.objects.filter(attachment_id__in=[thinned.pk, whole.pk], type="attachment.failed")

    staff = make_user("admin-1", staff=True)
    staff.is_superuser = True
    staff.save()
    client.force_login(staff)
    page = client.get("/admin/attachments/attachment/?storage=object_missing")
    assert page.status_code == 200
    listed = {str(pk) for pk in page.context["cl"].result_list.values_list("pk", flat=True)}
    assert listed == {str(lost.pk)}


def test_a_lost_derivative_is_made_again_and_the_file_stays_ready(drift):
    lost, thinned, whole = drift
    missing = _derivative(thinned).storage_key

    report = reconcile_storage()

    assert report.counts()["missing_derivatives_regenerated"] == 1
    assert _statuses(thinned) == [("ready", "")]
    job = OutboxMessage.objects.filter(actor_name="rederive").get()
    assert job.args == [str(thinned.pk)]
    assert pipeline.rederive(thinned.pk) == "regenerated"
    assert _exists(missing)
    assert _statuses(thinned) == [("ready", "")]
    # Whole again (and the lost one failed, so no longer looked for): the next run finds nothing.
    again = reconcile_storage()
    assert (again.counts()["missing_derivatives"], again.counts()["missing_originals"]) == (0, 0)
    assert again.rows_checked == 2


def test_the_killswitch_keeps_every_row_as_it_is(drift):
    lost, thinned, _whole = drift
    sweeper_control_set(killswitch=True, actor="test")

    report = reconcile_storage()

    assert {f.action for f in report.findings if f.kind.startswith("missing")} == {"kept"}
    assert report.mode == "killswitch"
    assert _statuses(lost, thinned) == [("ready", "")] * 2
    assert not OutboxMessage.objects.filter(actor_name="rederive").exists()


def test_the_json_summary_carries_the_counts(drift):
    out = StringIO()
    call_command("reconcile", "--dry-run", "--json", stdout=out)
    counts = json.loads(out.getvalue())["counts"]
    assert counts["missing_originals"] == 1 and counts["missing_derivatives"] == 1
    assert counts["orphan_multipart_found"] == 0  # local storage has no multipart uploads


def test_a_row_that_moved_on_since_the_walk_is_left_alone(drift, monkeypatch):
    """The service re-checks under the row lock: a file rescanned meanwhile is not failed."""
    from attachments.retention.services import missing_objects

    lost, _thinned, _whole = drift
    real = missing_objects.lock_attachment

    def rescanned_first(pk):
        if pk == lost.pk:
            Attachment.objects.filter(pk=pk).update(status=Status.PENDING)
        return real(pk)

    monkeypatch.setattr(missing_objects, "lock_attachment", rescanned_first)
    report = reconcile_storage()
    assert [f.action for f in report.findings if f.kind == "missing_original"] == ["skipped"]
    assert _statuses(lost) == [("pending", "")]


def test_a_killswitch_pulled_mid_walk_holds_the_batches_after_it(alice, monkeypatch):
    """Rows are walked in batches and the brakes are read before each: the first batch acts, the next is held."""
    from sweeper import missing_objects

    lost = sorted((_ready_image(alice) for _ in range(3)), key=lambda row: row.pk)
    for row in lost:
        get_gateway().delete(row.working_key)
    monkeypatch.setattr(missing_objects, "BATCH_SIZE", 2)
    real = missing_objects.attachment_fail_missing

    def fail_then_pull_the_killswitch(**kwargs):
        done = real(**kwargs)
        sweeper_control_set(killswitch=True, actor="ops")
        return done

    monkeypatch.setattr(missing_objects, "attachment_fail_missing", fail_then_pull_the_killswitch)
    report = reconcile_storage()

    actions = [
        f.action for f in sorted(report.findings, key=lambda f: f.attachment_id or "") if f.kind == "missing_original"
    ]
    # Batch 1 (two rows) was cleared to act before the switch; batch 2 reads it and keeps its row.
    assert actions == ["failed", "failed", "kept"]
    assert _statuses(*lost) == [("failed", "object_missing")] * 2 + [("ready", "")]
