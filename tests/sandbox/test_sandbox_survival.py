"""The worker survives whatever the job process does, and classifies it as content."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from processing.sandbox import Limits, SandboxUnavailable, kinds, run_job, runner, shutdown
from processing.sandbox.classify import classify
from tests.sandbox.helpers import corpus_dir, outcome

SAMPLE = corpus_dir() / "pillow/iss634.gif"
RULES = Path(__file__).resolve().parents[2] / "processing" / "rules"


def _misbehave(run, kind: str, **limits: float):
    return run(kind, json.dumps(limits).encode(), limits=Limits(**limits))


def test_segfault_is_corrupt_and_worker_goes_on(run) -> None:
    result = _misbehave(run, "_test_segfault")
    assert outcome(result) == "rejected:corrupt" and result.killed_by == "signal"
    assert "SIGSEGV" in result.message
    assert outcome(run("image", SAMPLE)) == "ready"


def test_unbounded_allocation_hits_the_address_space_limit(run) -> None:
    result = _misbehave(run, "_test_allocate", address_space_bytes=512 << 20)
    assert outcome(result) == "rejected:corrupt" and result.killed_by == "memory"
    assert result.peak_rss_kb is not None and result.peak_rss_kb < 512 << 10
    assert outcome(run("image", SAMPLE)) == "ready"


def test_cpu_loop_is_a_timeout(run) -> None:
    start = time.monotonic()
    result = _misbehave(run, "_test_loop", cpu_seconds=1, wall_seconds=5)
    assert outcome(result) == "rejected:timeout" and result.killed_by == "cpu"
    assert time.monotonic() - start < 4


def test_wall_clock_kill(run) -> None:
    start = time.monotonic()
    result = _misbehave(run, "_test_sleep", wall_seconds=1)
    assert outcome(result) == "rejected:timeout" and result.killed_by == "timeout"
    assert 0.9 < time.monotonic() - start < 3


@pytest.mark.parametrize("kind", ["_test_garbage", "_test_oversized", "_test_exit"])
def test_garbage_output_is_corrupt(run, kind: str) -> None:
    result = _misbehave(run, kind)
    assert outcome(result) == "rejected:corrupt" and result.data == {} and result.files == {}


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_complete_result_is_taken_without_waiting_for_the_job_to_exit(run) -> None:
    start = time.monotonic()
    result = _misbehave(run, "_test_answer_then_hang", wall_seconds=30)
    assert outcome(result) == "ready" and time.monotonic() - start < 5
    pid = result.data["pid"]
    deadline = time.monotonic() + 5
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(pid)  # hanging up got it killed, long before its deadline


def test_output_file_size_limit(run) -> None:
    result = _misbehave(run, "_test_bigfile", max_output_bytes=4096)
    assert outcome(result) == "rejected:corrupt" and "File too large" in result.message


def test_limits_and_fds_in_the_child(run) -> None:
    limits = Limits(address_space_bytes=700 << 20, cpu_seconds=7, max_output_bytes=1 << 20, max_open_files=32)
    result = run("_test_limits", b"x", limits=limits)
    r = result.data["rlimits"]
    assert r["RLIMIT_AS"] == [700 << 20, 700 << 20]
    assert r["RLIMIT_CPU"] == [7, 8]
    assert r["RLIMIT_FSIZE"] == [1 << 20, 1 << 20]
    assert r["RLIMIT_NOFILE"] == [32, 32]
    assert r["RLIMIT_CORE"] == [0, 0]
    assert result.data["fds"][:4] == [0, 1, 2, 3] and len(result.data["fds"]) <= 5  # +listdir's own
    assert result.data["pgid_is_pid"] is True


def test_child_environment_has_no_credentials(run, monkeypatch: pytest.MonkeyPatch) -> None:
    shutdown()  # the next call starts a server from this (poisoned) environment
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "DATABASE_URL", "DJANGO_SECRET_KEY"):
        monkeypatch.setenv(key, "leak-me")
    result = run("_test_env", b"x")
    assert set(result.data["env"]) <= {"PATH", "LANG"}
    assert runner._server is not None
    server_env = Path(f"/proc/{runner._server.proc.pid}/environ").read_bytes()
    assert b"leak-me" not in server_env


def test_only_registered_kinds_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "f").write_bytes(b"x")
    shipped = {name: kind for name, kind in kinds.KINDS.items() if not name.startswith("_test_")}
    monkeypatch.setattr(runner, "KINDS", shipped)  # a process that never installed the test kinds
    with pytest.raises(ValueError):
        run_job("_test_segfault", tmp_path / "f", tmp_path / "w")
    with pytest.raises(ValueError):
        run_job("exe", tmp_path / "f", tmp_path / "w")
    with pytest.raises(FileNotFoundError):
        run_job("image", tmp_path / "missing", tmp_path / "w")


def test_dead_fork_server_is_replaced(run) -> None:
    assert outcome(run("image", SAMPLE)) == "ready"
    server = runner._server
    assert server is not None
    os.killpg(server.proc.pid, signal.SIGKILL)
    server.proc.wait()
    assert outcome(run("image", SAMPLE)) == "ready"
    assert runner._server is not server


def test_a_job_outlives_its_server_being_replaced_for_other_rules(tmp_path: Path) -> None:
    # A caller asking for other archive-member rules gets a new server; a job another
    # thread runs on the old one goes on to its own end, and the old server stops after it.
    shutdown()
    work = tmp_path / "sleeping"
    got: list[str] = []

    def sleeper() -> None:
        try:
            got.append(outcome(run_job("_test_marked_sleep", SAMPLE, work, limits=Limits(wall_seconds=2))))
        except Exception as exc:  # noqa: BLE001 - reported below
            got.append(repr(exc))

    thread = threading.Thread(target=sleeper)
    thread.start()
    deadline = time.monotonic() + 60
    while not (work / "started").exists():
        assert time.monotonic() < deadline and thread.is_alive(), got
        time.sleep(0.02)
    first = runner._server
    assert first is not None
    assert outcome(run_job("image", SAMPLE, tmp_path / "other", member_rules=RULES)) == "ready"
    assert runner._server is not first
    thread.join(60)
    assert got == ["rejected:timeout"]  # its own wall limit ended it, not the replacement
    assert first.proc.poll() is not None and not runner._retired


def test_four_threads_at_once(tmp_path: Path) -> None:
    shutdown()  # all four threads race to start the server as well
    c = corpus_dir()
    jobs = [
        ("image", c / "pillow/hopper_orientation_6.jpg", "ready"),
        ("pdf", c / "pypdf/crazyones.pdf", "ready"),
        ("zip", c / "tika/droste.zip", "rejected:archive_limit"),
        ("image", c / "fuzzdb/lottapixel.jpg", "rejected:pixel_limit"),
        ("_test_segfault", c / "yauzl/empty.zip", "rejected:corrupt"),
        ("_test_sleep", c / "yauzl/empty.zip", "rejected:timeout"),
    ]
    failures: list[str] = []
    barrier = threading.Barrier(4)

    def worker(n: int) -> None:
        barrier.wait()
        for i in range(3):
            kind, path, want = jobs[(n + i) % len(jobs)]
            try:
                got = outcome(
                    run_job(
                        kind,
                        path,
                        tmp_path / f"t{n}-{i}",
                        limits=Limits(wall_seconds=1.5),
                    )
                )
            except Exception as exc:  # noqa: BLE001 - reported below
                got = repr(exc)
            if got != want:
                failures.append(f"thread {n} {kind}: {got} != {want}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failures


def test_a_jobs_threads_are_not_strays(tmp_path: Path) -> None:
    # A thread's /proc/<tid>/stat names the job's parent (the server) as its ppid; the
    # stray sweep that other jobs' ends trigger must not take it for an orphan process.
    result: list[object] = []
    threaded = threading.Thread(target=lambda: result.append(run_job("_test_threads", SAMPLE, tmp_path / "threads")))
    threaded.start()
    deadline, i = time.monotonic() + 20, 0
    while threaded.is_alive() and time.monotonic() < deadline:  # each job's end sweeps
        assert outcome(run_job("image", SAMPLE, tmp_path / f"short-{i}")) == "ready"
        i += 1
    threaded.join(30)
    assert outcome(result[0]) == "ready", result[0]


def _status(**kw: object) -> dict[str, object]:
    base = {
        "complete": True,
        "exit_code": 0,
        "signal": None,
        "maxrss_kb": 1000,
        "cpu_seconds": 0.1,
        "timed_out": False,
        "oversized": False,
    }
    return {**base, **kw}


def test_classify_distrusts_the_payload(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "thumb.webp").write_bytes(b"x")
    (tmp_path / "outside.webp").write_bytes(b"x")
    os.symlink("/etc/passwd", work / "link")

    def doc(files: dict[str, str], **extra: object) -> bytes:
        return json.dumps(
            {
                "outcome": "ok",
                "reason_code": None,
                "message": "",
                "data": {},
                "files": files,
                **extra,
            }
        ).encode()

    good = classify(_status(), doc({"thumbnail": "thumb.webp"}), Limits(), work)
    assert good.outcome == "ok" and good.files == {"thumbnail": work / "thumb.webp"}
    for payload in (
        doc({"x": "../outside.webp"}),
        doc({"x": str(tmp_path / "outside.webp")}),
        doc({"x": "/etc/passwd"}),
        doc({"x": "link"}),
        doc({"x": "missing"}),
        doc({}, outcome="maybe"),
        b"[1, 2]",
        b"\xff\xfe",
        b"",
    ):
        assert classify(_status(), payload, Limits(), work).reason_code == "corrupt", payload
    rejected = json.dumps({"outcome": "rejected", "reason_code": "bogus", "message": "", "data": {}})
    assert classify(_status(), rejected.encode(), Limits(), work).reason_code == "corrupt"
    killed = classify(_status(signal=int(signal.SIGKILL), cpu_seconds=31.0), b"", Limits(), work)
    assert (killed.reason_code, killed.killed_by) == ("timeout", "cpu")
    message = json.dumps(
        {
            "outcome": "rejected",
            "reason_code": "corrupt",
            "data": {},
            "message": "bad\x1b[31m" + "x" * 1000,
        }
    ).encode()
    cleaned = classify(_status(), message, Limits(), work).message
    assert "\x1b" not in cleaned and len(cleaned) <= 300


def test_unavailable_when_the_server_cannot_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutdown()
    monkeypatch.setattr(runner.sys, "executable", str(tmp_path / "no-such-python"))
    (tmp_path / "f").write_bytes(b"x")
    with pytest.raises(SandboxUnavailable):
        run_job("image", tmp_path / "f", tmp_path / "w")
    monkeypatch.undo()
    shutdown()
