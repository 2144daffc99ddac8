"""The solo re-run of a job that hit a resource limit really runs alone (flock on one file)."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

import pytest

from processing.sandbox import SandboxResult
from processing.sandbox.solo import SPACING, ResourcePressure, run_settled

KILLED = SandboxResult("rejected", "corrupt", "decoder crashed (SIGKILL)", killed_by="signal")
OK = SandboxResult("ok", None, "")


def _can_share(lock: Path) -> bool:
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def test_jobs_share_the_host_and_the_rerun_has_it_alone(tmp_path: Path) -> None:
    lock, seen = tmp_path / "solo.lock", []

    def run(work: Path) -> SandboxResult:
        seen.append((work.name, _can_share(lock)))
        return KILLED if len(seen) == 1 else OK

    assert run_settled(run, tmp_path / "w", wait_seconds=5, lock_path=lock) is OK
    assert seen == [("w", True), ("solo", False)]


def test_a_content_verdict_is_not_rerun(tmp_path: Path) -> None:
    limit = SandboxResult("rejected", "archive_limit", "1001 entries > 1000")
    calls = []
    assert run_settled(lambda w: calls.append(w) or limit, tmp_path, wait_seconds=5, lock_path=tmp_path / "l") is limit
    assert len(calls) == 1


def test_no_quiet_moment_is_transient(tmp_path: Path) -> None:
    lock = tmp_path / "solo.lock"
    other_job = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(other_job, fcntl.LOCK_SH)  # a job still running beside ours
    try:
        with pytest.raises(ResourcePressure, match="decoder crashed .SIGKILL. under load; no quiet moment"):
            run_settled(lambda w: KILLED, tmp_path, wait_seconds=0.2, lock_path=lock)
    finally:
        os.close(other_job)


def test_solo_reruns_are_spaced_so_limit_trippers_cannot_hold_the_host(tmp_path: Path) -> None:
    # One tenant's timeout bombs must not keep every other job waiting on re-runs.
    lock, calls = tmp_path / "solo.lock", []

    def run(work: Path) -> SandboxResult:
        calls.append(work.name)
        time.sleep(0.2 if work.name == "solo" else 0)  # the re-run took 0.2 s
        return KILLED

    assert run_settled(run, tmp_path / "a", wait_seconds=5, lock_path=lock).killed_by == "signal"
    with pytest.raises(ResourcePressure, match="another solo re-run ran just before"):
        run_settled(run, tmp_path / "b", wait_seconds=5, lock_path=lock)
    assert calls == ["a", "solo", "b"]  # no second re-run within SPACING x 0.2 s
    time.sleep(SPACING * 0.2 + 0.1)
    run_settled(run, tmp_path / "c", wait_seconds=5, lock_path=lock)
    assert calls[-2:] == ["c", "solo"]
