"""A hostile job inside the real sandbox tries every escape; each layer is tested alone too.

The job kinds are tests/sandbox/jobkinds.py's _test_escape and _test_setsid_stray.
The probe stands in for what a worker has within reach: a root-owned 0600 database
file and a storage root in 0700 directories, a listening TCP port and Unix socket, and
the worker's own environment holding a secret.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from processing.sandbox import Limits, confine, run_job, runner, shutdown
from tests.sandbox.helpers import outcome
from tests.sandbox.jobkinds import ESCAPES

ALL = "uid+nnp+seccomp+landlock+nproc+subreaper"
# The filesystem fallback for kernels without Landlock, forced here by naming it.
FALLBACK = "uid,nnp,seccomp,mountns,nproc,subreaper"
ALL_FALLBACK = "uid+nnp+seccomp+mountns+nproc+subreaper"
FS_ESCAPES = (
    "server_environ",
    "worker_environ",
    "database",
    "storage_root",
    "stored_file",
    "write_outside",
    "old_root",
    "uncover_old_root",
)
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="CI and this machine run as root; the uid layer needs it")


@pytest.fixture
def layers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """layers("seccomp") restarts the fork server with only that confinement."""

    def restart(value: str) -> str:
        shutdown()
        monkeypatch.setenv(confine.CONFINE_ENV, value)
        # RLIMIT_NPROC counts every process of the sandbox uid on the machine: a low one
        # here leaves room for the jobs of other test runs while a fork bomb holds 32.
        monkeypatch.setenv("AIRLOCK_SANDBOX_NPROC", "32")
        return runner.confinement()

    yield restart
    shutdown()  # the next test gets a server with the default (all) layers
    monkeypatch.delenv(confine.CONFINE_ENV, raising=False)


@pytest.fixture
def probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    secret_dir = tmp_path / "var"
    (secret_dir / "storage" / "tenants").mkdir(parents=True)
    for d in (secret_dir, secret_dir / "storage"):
        d.chmod(0o700)
    database = secret_dir / "airlock.sqlite3"
    database.write_bytes(b"SQLite format 3\0 token=plain")
    stored = secret_dir / "storage" / "tenants" / "other-tenant.pdf"
    stored.write_bytes(b"%PDF-1.7 someone else's file")
    for f in (database, stored):
        f.chmod(0o600)
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o777)
    outside.chmod(0o777)  # writable by anyone: only the confinement can stop a write
    tcp = socket.create_server(("127.0.0.1", 0))
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(str(tmp_path / "broker.sock"))
    unix.listen()
    os.chmod(tmp_path / "broker.sock", 0o777)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "worker-secret-do-not-leak")
    yield {
        "tcp_port": tcp.getsockname()[1],
        "unix_socket": str(tmp_path / "broker.sock"),
        "worker_pid": os.getpid(),
        "database": str(database),
        "storage_root": str(secret_dir / "storage"),
        "stored_file": str(stored),
        "outside_dir": str(outside),
        "forks": 1000,
    }
    tcp.close()
    unix.close()


@pytest.fixture
def run_probe(tmp_path: Path, probe: dict[str, Any]):
    def _run(kind: str = "_test_escape", limits: Limits = Limits(), **extra: Any):  # noqa: B008
        src = tmp_path / "input"
        src.write_text(json.dumps({**probe, **extra}))  # what the job kind reads (jobkinds._facts)
        work = tmp_path / f"work-{time.monotonic_ns()}"
        result = run_job(kind, src, work, limits=limits)
        result.work_dir = work  # type: ignore[attr-defined]
        return result

    return _run


def _denied(data: dict[str, Any], names: tuple[str, ...]) -> None:
    worked = {n: data[n] for n in names if data[n] == "ok"}
    assert not worked, f"escapes that worked: {worked}"


@root_only
def test_every_layer_is_in_force_here() -> None:
    # Run as `AIRLOCK_SANDBOX_CONFINE=<FALLBACK> pytest tests/sandbox`, every sandbox test
    # runs against the mount-namespace fallback instead of Landlock.
    expected = ALL if confine.CONFINE_ENV not in os.environ else confine.describe(confine.requested_layers())
    shutdown()
    assert runner.confinement() == expected
    assert confine.describe(confine.in_force()) == expected


def test_without_landlock_all_means_the_mount_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(confine, "landlock_abi", lambda: 0)
    requested = confine.requested_layers("all")
    assert "landlock" not in requested and "mountns" in requested
    assert "mountns" in confine.in_force(requested)
    monkeypatch.undo()
    if confine.landlock_abi() >= 1:  # one filesystem layer: the fallback is not "missing" here
        assert "mountns" not in confine.requested_layers("all")


@root_only
@pytest.mark.parametrize(("value", "expected"), [("all", ALL), (FALLBACK, ALL_FALLBACK)], ids=["landlock", "mountns"])
def test_a_hostile_job_escapes_nowhere(layers, run_probe, value: str, expected: str) -> None:
    assert layers(value) == expected
    result = run_probe()
    assert outcome(result) == "ready", result.message
    data = result.data
    _denied(data, ESCAPES)
    assert data["forks"] < 32  # of the 1,000 it tried
    assert data["uid"] == confine.sandbox_ids()[0]
    caps = data["capabilities"]
    assert {caps[k] for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")} == {"0000000000000000"}


def test_without_confinement_the_same_job_gets_out(layers, run_probe) -> None:
    # The escapes are real: with every layer off, they work (so the tests above can fail).
    assert layers("none") == "none"
    data = run_probe(forks=50).data
    for name in (
        "tcp_connect",
        "unix_connect",
        "database",
        "storage_root",
        "stored_file",
        "write_outside",
        "execve",
        "signal_worker",
    ):
        assert data[name] == "ok", (name, data[name])
    assert data["forks"] == 50


@root_only
def test_uid_alone_keeps_root_files_and_root_processes_out_of_reach(layers, run_probe) -> None:
    assert layers("uid") == "uid"
    data = run_probe(forks=10).data
    _denied(
        data,
        (
            "server_environ",
            "worker_environ",
            "server_mem",
            "database",
            "storage_root",
            "stored_file",
            "ptrace_server",
            "signal_worker",
            "setuid_root",
        ),
    )
    assert data["capabilities"]["CapEff"] == data["capabilities"]["CapBnd"] == "0000000000000000"


def test_seccomp_alone_denies_sockets_exec_ptrace_and_namespaces(layers, run_probe) -> None:
    assert layers("seccomp") in ("seccomp", "nnp+seccomp")
    data = run_probe(forks=10).data
    _denied(data, ("tcp_connect", "unix_connect", "execve", "ptrace_server", "unshare_user"))
    assert data["tcp_connect"] == "denied: EPERM"


def test_landlock_alone_confines_the_filesystem(layers, run_probe) -> None:
    if confine.landlock_abi() < 1:
        pytest.skip("this kernel has no Landlock")  # CI's has ABI 7 (STACK-NOTES)
    assert layers("landlock") == "landlock"
    data = run_probe(forks=10).data
    names = ["server_environ", "worker_environ", "database", "storage_root", "stored_file", "write_outside"]
    if confine.landlock_abi() >= 4:
        names.append("tcp_connect")
    if confine.landlock_abi() >= 6:
        names.append("signal_worker")  # a named Unix socket is not a Landlock right (seccomp's)
    # Root keeps DAC_OVERRIDE here: only Landlock stands between the job and these.
    _denied(data, tuple(names))


def test_mountns_alone_confines_the_filesystem(layers, run_probe) -> None:
    # Root keeps its uid here (no uid layer), so only the private root stands between
    # the job and these paths: they do not exist in it.
    assert layers("mountns") == "mountns"
    data = run_probe(forks=10).data
    _denied(data, FS_ESCAPES)
    assert {data[n] for n in FS_ESCAPES[:6]} == {"denied: ENOENT"}  # not there at all


@pytest.mark.parametrize("kind", ["image", "pdf", "zip"])
def test_decoders_work_inside_the_private_root(layers, run, kind: str) -> None:
    from tests.sandbox.helpers import noisy_png
    from tests.support import pdf_bytes, zip_bytes

    assert "mountns" in layers(FALLBACK)
    sample = {"image": noisy_png(320, 200), "pdf": pdf_bytes(), "zip": zip_bytes()}[kind]
    result = run(kind, sample)
    assert outcome(result) == "ready", result.message
    assert all(p.is_file() for p in result.files.values())


@root_only
def test_nproc_stops_a_fork_bomb(layers, run_probe) -> None:
    assert layers("uid,nproc") == "uid+nproc"
    data = run_probe(forks=1000).data
    assert 0 < data["forks"] < 32


@pytest.mark.parametrize("answer", [False, True], ids=["killed-at-deadline", "answered-then-hung"])
def test_a_setsid_grandchild_does_not_outlive_its_job(layers, run_probe, answer: bool) -> None:
    assert "subreaper" in layers("subreaper")
    result = run_probe("_test_setsid_stray", limits=Limits(wall_seconds=1.5, cpu_seconds=5), answer=answer)
    if not answer:
        assert outcome(result) == "rejected:timeout"
    stray = int((result.work_dir / "stray.pid").read_text())
    assert not _alive_after(stray, 2.0), "the stray outlived its job"


def test_without_the_subreaper_the_stray_survives(layers, run_probe) -> None:
    assert layers("none") == "none"
    result = run_probe("_test_setsid_stray", limits=Limits(wall_seconds=5), answer=True)
    stray = result.data["stray"]
    try:
        assert _alive_after(stray, 1.0)
    finally:
        os.kill(stray, 9)


def _alive_after(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            return False
        if state == "Z":
            return False
        time.sleep(0.05)
    return True


@root_only
def test_derivatives_come_back_owned_by_the_worker(run) -> None:
    # Written by the sandbox uid, moved into storage afterwards: a later job of that uid
    # must not own (and so be able to read) another tenant's thumbnail.
    from tests.sandbox.helpers import noisy_png

    result = run("image", noisy_png())
    assert outcome(result) == "ready"
    assert {(p.stat().st_uid, p.stat().st_mode & 0o777) for p in result.files.values()} == {(0, 0o600)}
