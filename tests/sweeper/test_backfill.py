"""Backfill: select, transition on a locked row, enqueue through the outbox, resume from a checkpoint."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from attachments.models import (
    Attachment,
    DeadLetter,
    Lifecycle,
    OutboxMessage,
    Status,
    TransitionLog,
)
from sweeper.backfill import Selection, backfill_run
from sweeper.models import BackfillCheckpoint
from tests.sweeper.support import make_attachment

pytestmark = pytest.mark.django_db


@pytest.fixture
def population(alice):
    now = timezone.now()
    make = lambda **kw: make_attachment(alice, created_at=kw.pop("created_at", now), files=False, **kw)  # noqa: E731
    return {
        "image_complete": make(),
        "image_missing": make(thumbnail=False),
        "doc_missing": make(profile="document", thumbnail=False),
        "doc_complete": make(profile="document", thumbnail=False, metadata={"page_count": 2}),
        "zip_complete": make(profile="archive", thumbnail=False, metadata={"entries": 1, "total_bytes": 5}),
        "committed_missing": make(thumbnail=False, lifecycle=Lifecycle.COMMITTED),
        "old_missing": make(thumbnail=False, lifecycle=Lifecycle.COMMITTED, created_at=now - timedelta(days=40)),
        "discarded": make(thumbnail=False, lifecycle=Lifecycle.DISCARDED, expires_at=now),
        "expired": make(thumbnail=False, created_at=now - timedelta(days=8)),
        "pending": make(thumbnail=False, status=Status.PENDING),
        "failed": make(thumbnail=False, status=Status.FAILED, lifecycle=Lifecycle.COMMITTED),
    }


def _rescanned(population) -> set[str]:
    ids = set(TransitionLog.objects.filter(actor="system:backfill").values_list("attachment_id", flat=True))
    return {name for name, a in population.items() if a.pk in ids}


def test_without_rescan_only_what_is_missing_a_promised_derivative(population):
    report = backfill_run(Selection())

    assert _rescanned(population) == {"image_missing", "doc_missing", "committed_missing", "old_missing"}
    assert (report.processed, report.total, report.finished) == (4, 4, True)
    attachment = Attachment.objects.get(pk=population["image_missing"].pk)
    assert attachment.status == Status.PENDING
    log = TransitionLog.objects.get(attachment=attachment)
    assert (log.transition, log.from_status, log.to_status) == ("rescan", "ready", "pending")
    assert OutboxMessage.objects.filter(actor_name="intake", args__0=str(attachment.pk)).count() == 1


def test_rescan_flags_every_ready_live_attachment_and_hides_none(population):
    """Issue #28/#29: `backfill --rescan` used to put ready files back to pending (hidden from their users)."""
    now = timezone.now()
    report = backfill_run(Selection(rescan=True, profile="image", since=now - timedelta(days=1)))
    flagged = {
        name for name, a in population.items() if Attachment.objects.get(pk=a.pk).rescan_requested_at is not None
    }
    assert flagged == {"image_complete", "image_missing", "committed_missing"}
    assert report.processed == 3 and report.finished
    # Nothing left ready, nothing queued by the command: the background rescan scans them while they stay served.
    assert {a.status for a in Attachment.objects.filter(pk__in=[population[n].pk for n in flagged])} == {"ready"}
    assert not TransitionLog.objects.exists() and not OutboxMessage.objects.exists()


def test_rescan_applies_to_ready_files_only(population):
    with pytest.raises(ValueError, match="ready files only"):
        backfill_run(Selection(status=Status.FAILED, rescan=True))


def test_failed_ones_are_retried(population):
    failed = population["failed"]
    processing = DeadLetter.objects.create(kind=DeadLetter.Kind.PROCESSING, attachment=failed, last_error="clamd")
    sweep = DeadLetter.objects.create(kind=DeadLetter.Kind.SWEEP, attachment=failed, last_error="403")
    report = backfill_run(Selection(status=Status.FAILED))
    assert _rescanned(population) == {"failed"} and report.processed == 1
    assert TransitionLog.objects.get(actor="system:backfill").transition == "retry"
    # Retried, its processing dead letter is answered (as staff's requeue answers it); a sweep one is not.
    processing.refresh_from_db()
    sweep.refresh_from_db()
    assert processing.resolved_by == "system:backfill" and sweep.resolved_at is None


def test_an_interrupted_run_resumes_after_its_checkpoint(population):
    selection = Selection()
    first = backfill_run(selection, limit=2, batch_size=1)
    assert first.processed == 2 and not first.finished
    checkpoint = BackfillCheckpoint.objects.get()
    assert checkpoint.processed == 2 and checkpoint.finished_at is None

    second = backfill_run(selection, batch_size=1)

    assert second.resumed_after == str(checkpoint.last_id)
    assert second.finished and second.processed == 2
    ids = list(TransitionLog.objects.filter(actor="system:backfill").values_list("attachment_id", flat=True))
    assert len(ids) == len(set(ids)) == 4  # every selected row exactly once
    assert _rescanned(population) == {"image_missing", "doc_missing", "committed_missing", "old_missing"}
    assert BackfillCheckpoint.objects.get().finished_at is not None


def test_a_finished_selection_starts_over_and_restart_ignores_the_checkpoint(population):
    selection = Selection(profile="document")
    assert backfill_run(selection).processed == 1
    Attachment.objects.filter(pk=population["doc_missing"].pk).update(status=Status.READY)
    assert backfill_run(selection).processed == 1  # finished before: a new pass
    Attachment.objects.filter(pk=population["doc_missing"].pk).update(status=Status.READY)
    backfill_run(selection, limit=0)
    assert backfill_run(selection, restart=True).processed == 1


def test_dry_run_counts_and_changes_nothing(population):
    report = backfill_run(Selection(), dry_run=True)
    assert report.total == 4 and report.dry_run
    assert not TransitionLog.objects.exists() and not BackfillCheckpoint.objects.exists()


def test_the_command_shows_progress_on_stderr_and_json_on_stdout(population):
    from attachments.services.handoff import jobs_heartbeat_beat

    jobs_heartbeat_beat(in_process_broker=True)  # a serve is running (on the embedded default, it runs the jobs)
    out, err = StringIO(), StringIO()
    call_command("backfill", "--profile", "image", "--json", stdout=out, stderr=err)
    data = json.loads(out.getvalue())
    assert data["processed"] == 3 and data["finished"] is True
    assert "3/3" in err.getvalue() and "[" in err.getvalue()

    out = StringIO()
    call_command("backfill", "--status", "failed", "--since", "2000-01-01", "--no-progress", stdout=out)
    assert "re-processed 1 of 1" in out.getvalue()


@pytest.mark.parametrize("args", [["--profile", "nope"], ["--since", "yesterday"]])
def test_the_command_refuses_bad_options(args):
    with pytest.raises(CommandError):
        call_command("backfill", *args, stdout=StringIO(), stderr=StringIO())
