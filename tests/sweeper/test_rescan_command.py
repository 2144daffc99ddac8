"""`manage.py rescan`: flag ready files for the background rescan; they stay ready; and commands hand off their jobs."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from attachments.models import Attachment, JobsHeartbeat, Lifecycle, OutboxMessage, RescanCheckpoint, Status
from attachments.services import handoff, outbox
from sweeper.since import parse_since
from tests.sweeper.support import make_attachment

pytestmark = pytest.mark.django_db


@pytest.fixture
def files(alice):
    now = timezone.now()
    make = lambda **kw: make_attachment(alice, files=False, **{"created_at": now, **kw})  # noqa: E731
    return {
        "photo": make(lifecycle=Lifecycle.COMMITTED),
        "old_photo": make(lifecycle=Lifecycle.COMMITTED, created_at=now - timedelta(days=10)),
        "doc": make(lifecycle=Lifecycle.COMMITTED, profile="document"),
        "pending": make(status=Status.PENDING),
        "discarded": make(lifecycle=Lifecycle.DISCARDED, expires_at=now),
    }


def _flagged(files) -> set[str]:
    return {name for name, row in files.items() if Attachment.objects.get(pk=row.pk).rescan_requested_at is not None}


def test_rescan_since_a_duration_with_a_profile_flags_and_changes_no_status(files):
    out = StringIO()
    call_command("rescan", "--since", "7d", "--profile", "image", stdout=out)
    assert _flagged(files) == {"photo"}
    assert "flagged 1 ready files" in out.getvalue() and "stay ready and served" in out.getvalue()
    assert Attachment.objects.get(pk=files["photo"].pk).status == Status.READY
    assert not OutboxMessage.objects.exists()


def test_rescan_dry_run_counts_and_changes_nothing(files):
    out = StringIO()
    call_command("rescan", "--dry-run", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert (report["selected"], report["flagged"], report["dry_run"]) == (3, 0, True)
    assert _flagged(files) == set()


def test_rescan_restarts_a_finished_walk(files):
    RescanCheckpoint.objects.create(
        version="v", finished_at=timezone.now(), cursor_id=files["doc"].pk, cursor_created_at=timezone.now()
    )
    call_command("rescan", "--since", "2000-01-01", stdout=StringIO())
    checkpoint = RescanCheckpoint.objects.get()
    assert (checkpoint.finished_at, checkpoint.cursor_id) == (None, None)
    assert _flagged(files) == {"photo", "old_photo", "doc"}


@pytest.mark.parametrize("args", [["--since", "yesterday"], ["--profile", "nope"], ["--since", "7y"]])
def test_rescan_refuses_bad_options(args):
    with pytest.raises(CommandError):
        call_command("rescan", *args, stdout=StringIO())


def test_rescan_refuses_when_background_rescans_are_off(files, settings):
    settings.AIRLOCK_RATE_LIMITS = settings.AIRLOCK_RATE_LIMITS.replace(rescan_files_per_minute=0)
    with pytest.raises(CommandError, match="rescan_files_per_minute=0"):
        call_command("rescan", stdout=StringIO())
    assert _flagged(files) == set()


def test_since_takes_dates_datetimes_and_durations():
    now = timezone.now()
    assert parse_since("90m", now=now) == now - timedelta(minutes=90)
    assert parse_since("2w", now=now) == now - timedelta(weeks=2)
    assert parse_since("2026-11-01").date().isoformat() == "2026-11-01"
    assert parse_since("2026-11-01T10:00:00+00:00").hour == 10


# --- handing a command's jobs to serve (embedded default: in-process broker) --------------


@pytest.fixture
def in_process_broker(monkeypatch):
    """The embedded default's broker, whatever this run's broker is (the decision is made on it)."""
    monkeypatch.setattr(outbox, "broker_in_process", lambda: True)


def test_without_a_running_serve_backfill_refuses_before_changing_anything(files, in_process_broker):
    Attachment.objects.filter(pk=files["photo"].pk).update(status=Status.FAILED)
    with pytest.raises(CommandError, match="no `manage.py serve` is running"):
        call_command("backfill", "--status", "failed", "--no-progress", stdout=StringIO(), stderr=StringIO())
    assert Attachment.objects.get(pk=files["photo"].pk).status == Status.FAILED
    assert not OutboxMessage.objects.exists()
    # A dry run needs no serve.
    call_command("backfill", "--status", "failed", "--dry-run", "--no-progress", stdout=StringIO())


def test_with_a_running_serve_the_jobs_wait_in_the_outbox_for_its_relay(
    files, in_process_broker, django_capture_on_commit_callbacks
):
    handoff.jobs_heartbeat_beat(in_process_broker=True)
    Attachment.objects.filter(pk=files["photo"].pk).update(status=Status.FAILED)
    err = StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("backfill", "--status", "failed", "--no-progress", stdout=StringIO(), stderr=err)
    assert "handed to the running serve" in err.getvalue()
    message = OutboxMessage.objects.get(actor_name="intake")
    assert message.sent_at is None  # nothing sent to this process's own broker, even once committed
    # serve's tick relays it (its relay_pending picks up unsent rows).
    assert outbox.relay_one(message.pk)
    assert OutboxMessage.objects.get(pk=message.pk).sent_at is not None


def test_a_stale_heartbeat_is_no_serve(files, in_process_broker):
    handoff.jobs_heartbeat_beat(
        in_process_broker=True, now=timezone.now() - handoff.stale_after() - timedelta(seconds=1)
    )
    assert handoff.serve_running() is None
    with pytest.raises(handoff.ServeNotRunning):
        handoff.command_enqueues("backfill", require_serve=True)
    assert handoff.command_enqueues("sweep", require_serve=False).mode == "outbox"


def test_a_shared_broker_sends_as_usual(monkeypatch):
    monkeypatch.setattr(outbox, "broker_in_process", lambda: False)
    assert handoff.command_enqueues("backfill", require_serve=True).mode == "broker"
    assert outbox._relay_elsewhere is False


@pytest.mark.parametrize("command", [["sweep"], ["reconcile"]])
def test_sweep_and_reconcile_leave_their_jobs_for_serve(command, in_process_broker):
    err = StringIO()
    call_command(*command, stdout=StringIO(), stderr=err)
    assert outbox._relay_elsewhere is True
    assert "no serve is running: its jobs wait in the outbox" in err.getvalue()


def test_the_serve_scheduler_beats_and_leaves(transactional_db):
    from ops.runtime import run_ticks_once

    run_ticks_once(relays_for_commands=False)  # a scheduler without the worker beside it relays nobody's jobs
    assert handoff.serve_running() is None
    run_ticks_once(relays_for_commands=True)
    assert handoff.serve_running() is not None
    handoff.jobs_heartbeat_leave()
    assert not JobsHeartbeat.objects.exists()
