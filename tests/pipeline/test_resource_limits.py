"""A resource limit in the sandbox is a verdict only when it trips again on a solo re-run.

The sandbox is real; what varies is the first run's result, given as the fork server
gave it in production: a job SIGKILLed by the stray sweep while other jobs finished
("decoder crashed (SIGKILL)"), one that ran past its wall clock on a busy host.
"""

import logging

import pytest

from attachments.models import Attachment, DeadLetter, TransitionLog
from processing import sandbox_config
from processing.sandbox import SandboxResult
from tests.support import run_pipeline, upload, zip_bytes

pytestmark = pytest.mark.django_db

KILLED = SandboxResult("rejected", "corrupt", "decoder crashed (SIGKILL)", killed_by="signal")
WALL = SandboxResult("rejected", "timeout", "decoder exceeded 60s of wall-clock time", killed_by="timeout")
MEMORY = SandboxResult("rejected", "corrupt", "decoder ran out of memory", killed_by="memory")


@pytest.fixture
def first_runs(monkeypatch):
    """Results the next sandbox runs give instead of running; then the real sandbox."""
    queued: list[SandboxResult] = []
    calls: list[str] = []
    real = sandbox_config.run_sandboxed

    def run(kind, path, work_dir):
        calls.append(str(work_dir))
        return queued.pop(0) if queued else real(kind, path, work_dir)

    monkeypatch.setattr(sandbox_config, "run_sandboxed", run)
    return queued, calls


def _zip(api, alice):
    return upload(api(alice), zip_bytes(), filename="a.zip", profile="archive", content_type="application/zip")


@pytest.mark.parametrize("first", [KILLED, WALL, MEMORY], ids=["signal", "wall", "memory"])
def test_a_limit_that_does_not_repeat_alone_is_no_verdict(alice, api, first_runs, first):
    queued, calls = first_runs
    queued.append(first)
    attachment_id = _zip(api, alice)
    assert run_pipeline(attachment_id) == "ready"
    assert len(calls) == 2 and calls[1].endswith("/solo")  # re-run in its own work dir


def test_the_same_limit_again_alone_is_rejected_and_the_log_line_says_why(alice, api, first_runs, caplog):
    queued, _ = first_runs
    queued.extend([WALL, WALL])
    attachment_id = _zip(api, alice)
    with caplog.at_level(logging.INFO, logger="airlock.transitions"):
        assert run_pipeline(attachment_id) == "rejected"
    row = Attachment.objects.get(pk=attachment_id)
    assert row.reason_code == "timeout"
    assert row.reason_message == "decoder exceeded 60s of wall-clock time (again when run alone)"
    [line] = [r for r in caplog.records if r.getMessage() == "transition" and r.outcome == "rejected"]
    assert line.reason_code == "timeout" and line.reason_message == row.reason_message


def test_a_different_limit_alone_is_transient_retried_then_failed(alice, api, first_runs, settings):
    queued, _ = first_runs
    settings.AIRLOCK_RETRIES = settings.AIRLOCK_RETRIES.replace(max_attempts=2)
    queued.extend([KILLED, MEMORY])
    attachment_id = _zip(api, alice)
    assert run_pipeline(attachment_id) == "pending"  # retried: not a content verdict
    row = Attachment.objects.get(pk=attachment_id)
    assert row.attempts == 1 and row.reason_code == ""
    retry = TransitionLog.objects.get(attachment=row, transition="retry")
    assert "decoder crashed (SIGKILL) under load" in retry.message
    queued.extend([KILLED, MEMORY])
    assert run_pipeline(attachment_id) == "failed"  # at the attempts cap
    assert DeadLetter.objects.filter(attachment_id=attachment_id).exists()


def test_the_solo_rerun_derivatives_are_stored(alice, api, first_runs):
    from tests.support import jpeg_bytes

    queued, calls = first_runs
    queued.append(KILLED)
    attachment_id = upload(api(alice), jpeg_bytes((320, 240)))
    assert run_pipeline(attachment_id) == "ready"
    row = Attachment.objects.get(pk=attachment_id)
    assert calls[1].endswith("/solo") and row.derivatives.filter(kind="thumbnail").exists()
