"""Confinement fails closed: a requested layer this host cannot apply stops every decoder
job (a transient failure: retried, then `failed`, never `rejected`, never run with less)
and fails /readyz, unless AIRLOCK_SANDBOX_ACCEPT_MISSING accepts its absence by name.

The host without the layers is made with a seccomp filter (helpers.BLOCK_FS_LAYERS): no
Landlock syscalls, no user or mount namespaces. From a worker running as `nobody`, the
issue's case, that leaves `uid`, `nproc` (root only) and the filesystem layer (`mountns`,
the fallback `all` asks for where Landlock is missing) unapplied; from root, `mountns`.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from processing.sandbox import confine, runner, shutdown
from tests.sandbox.helpers import BLOCK_FS_LAYERS, SHOW_TO_NOBODY

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534
ACCEPT = confine.ACCEPT_ENV
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="CI and this machine run as root")

# Runs as root: SHOW_TO_NOBODY, then the seccomp filter, then becomes nobody and, as a
# worker would, runs one decoder job and the /readyz sandbox check.
_SCRIPT = (
    SHOW_TO_NOBODY
    + BLOCK_FS_LAYERS
    + r"""
import json
sys.path.insert(0, sys.argv[1])
nobody, accept = int(sys.argv[2]), sys.argv[3]
os.setgroups([])
os.setresgid(nobody, nobody, nobody)
os.setresuid(nobody, nobody, nobody)
os.environ.pop("AIRLOCK_SANDBOX_CONFINE", None)  # the default: all
os.environ["AIRLOCK_SANDBOX_ACCEPT_MISSING"] = accept
os.environ["TMPDIR"] = tempfile.mkdtemp(dir="/tmp")

from pathlib import Path
from django.conf import settings
settings.configure(DATABASES={})  # ops.health's check threads close their connections: none here
from ops import health
from processing.sandbox import SandboxUnavailable, run_job, runner
from tests.sandbox import jobkinds
jobkinds.install()

home = Path(os.environ["TMPDIR"])
src = home / "input"
src.write_text(json.dumps({"worker_pid": os.getpid(), "forks": 2}))
got = {"worker_uid": os.geteuid()}
try:
    result = run_job("_test_escape", src, home / "work")
except SandboxUnavailable as exc:
    got["job"] = f"unavailable: {exc}"
else:
    got["job"] = result.outcome
    got["job_uid"] = result.data.get("uid")
    got["applied"] = runner.confinement()
    runner.shutdown()
got["readyz"] = health.Readiness({"sandbox": health._run("sandbox", health.check_sandbox, 60)()}).as_dict()
print(json.dumps(got))
"""
)


def _worker_as_nobody_without_fs_layers(accept: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(ROOT), str(NOBODY), accept],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@root_only
@pytest.mark.parametrize(
    ("accept", "refused"),
    [("", "uid, mountns, nproc"), ("uid,nproc", "mountns")],
    ids=["nothing-accepted", "filesystem-not-accepted"],
)
def test_a_layer_that_cannot_be_applied_stops_every_job_and_fails_readyz(accept: str, refused: str) -> None:
    got = _worker_as_nobody_without_fs_layers(accept)
    assert got["worker_uid"] == NOBODY
    state = f"refused: {refused} not applied (not accepted by {ACCEPT}); decoder jobs do not run"
    assert got["job"] == f"unavailable: confinement {state}"  # the job never ran, confined or not
    ready = got["readyz"]
    assert ready["status"] == "unavailable"
    check = ready["checks"]["sandbox"]
    assert (check["ok"], check["error"], check["state"]) == (False, state, state)
    assert check["confinement"] == "nnp+seccomp+subreaper"
    assert check["missing"] == ["uid", "mountns", "nproc"]
    assert set(check["unprotected"]) == {"uid", "mountns", "nproc"}


@root_only
def test_accepted_missing_layers_run_jobs_and_readyz_names_them() -> None:
    got = _worker_as_nobody_without_fs_layers("uid,mountns,nproc")
    assert (got["job"], got["job_uid"]) == ("ok", NOBODY)
    assert got["applied"] == "nnp+seccomp+subreaper"
    ready = got["readyz"]
    assert ready["status"] == "ok"
    check = ready["checks"]["sandbox"]
    assert check["ok"] is True and check["error"] is None
    assert check["state"] == f"degraded: uid, mountns, nproc not applied (accepted by {ACCEPT})"
    assert check["confinement"] == "nnp+seccomp+subreaper"
    assert check["unprotected"] == {name: confine.UNPROTECTED[name] for name in ("uid", "mountns", "nproc")}


@pytest.fixture
def fork_server_without_fs_layers(monkeypatch: pytest.MonkeyPatch):
    """This process's fork server (as root) starts under the seccomp filter."""
    shutdown()
    monkeypatch.setattr(runner, "_BOOT", BLOCK_FS_LAYERS + runner._BOOT)
    monkeypatch.delenv(confine.CONFINE_ENV, raising=False)
    monkeypatch.delenv(ACCEPT, raising=False)
    yield
    shutdown()  # the next test gets a server without the filter
    monkeypatch.undo()


@root_only
def test_the_file_is_retried_then_failed_never_rejected(
    fork_server_without_fs_layers, alice, api, settings, caplog
) -> None:
    from attachments.models import DeadLetter
    from tests.support import jpeg_bytes, run_pipeline, upload

    settings.AIRLOCK_RETRIES = settings.AIRLOCK_RETRIES.replace(max_attempts=2)
    attachment_id = upload(api(alice), jpeg_bytes())
    with caplog.at_level(logging.ERROR, logger=runner.__name__):
        assert run_pipeline(attachment_id) == "pending"  # retried: infrastructure, not content
        assert run_pipeline(attachment_id) == "failed"
    letter = DeadLetter.objects.get(attachment_id=attachment_id)
    assert "mountns not applied (not accepted by AIRLOCK_SANDBOX_ACCEPT_MISSING)" in letter.last_error
    refusals = [r.getMessage() for r in caplog.records if "fork server not started" in r.getMessage()]
    assert len(refusals) == 2 and "mountns not applied" in refusals[0]


@root_only
def test_accepting_the_missing_layer_lets_the_file_through(
    fork_server_without_fs_layers, alice, api, monkeypatch
) -> None:
    from tests.support import jpeg_bytes, run_pipeline, upload

    monkeypatch.setenv(ACCEPT, "mountns")
    assert run_pipeline(upload(api(alice), jpeg_bytes())) == "ready"
    assert runner.confinement() == "uid+nnp+seccomp+nproc+subreaper"


def test_readyz_fails_naming_the_layer_and_passes_degraded_once_accepted(client, db, monkeypatch) -> None:
    # The web process's own probe, as on a host without Landlock and user namespaces.
    monkeypatch.setattr(confine, "landlock_abi", lambda: 0)
    monkeypatch.setattr(confine, "mountns_available", lambda: False)
    monkeypatch.delenv(confine.CONFINE_ENV, raising=False)
    monkeypatch.delenv(ACCEPT, raising=False)
    response = client.get("/readyz")
    check = response.json()["checks"]["sandbox"]
    assert response.status_code == 503
    assert check["ok"] is False and check["error"].startswith("refused: ")
    assert "mountns" in check["error"] and "mountns" in check["unprotected"]
    monkeypatch.setenv(ACCEPT, "uid,mountns,nproc")
    response = client.get("/readyz")
    check = response.json()["checks"]["sandbox"]
    assert check["ok"] is True and check["error"] is None
    assert check["state"].startswith("degraded: ") and "mountns" in check["state"]
    assert check["state"].endswith(f"not applied (accepted by {ACCEPT})")


def test_a_misspelt_accepted_layer_is_an_error_not_an_acceptance(monkeypatch) -> None:
    monkeypatch.setenv(ACCEPT, "landlok")
    with pytest.raises(ValueError, match="landlok"):
        confine.posture()


# The server's probe finds Landlock (its version query, flags=1, still answers) but a job
# cannot build a ruleset (flags=0): the layer fails in the job, after the probe said yes.
_LANDLOCK_FAILS_IN_THE_JOB = (
    "import errno, pyseccomp as _sc; _f = _sc.SyscallFilter(_sc.ALLOW); "
    "_f.add_rule(_sc.ERRNO(errno.EPERM), 'landlock_create_ruleset', _sc.Arg(2, _sc.EQ, 0)); _f.load(); "
)


@root_only
def test_a_layer_that_fails_inside_the_job_is_retried_not_rejected(alice, api, monkeypatch, caplog) -> None:
    from tests.support import jpeg_bytes, run_pipeline, upload

    if confine.landlock_abi() < 1:
        pytest.skip("this kernel has no Landlock")  # CI's has ABI 7 (STACK-NOTES)
    shutdown()
    monkeypatch.setattr(runner, "_BOOT", _LANDLOCK_FAILS_IN_THE_JOB + runner._BOOT)
    monkeypatch.delenv(confine.CONFINE_ENV, raising=False)
    try:
        attachment_id = upload(api(alice), jpeg_bytes())
        with caplog.at_level(logging.ERROR, logger=runner.__name__):
            assert run_pipeline(attachment_id) == "pending"  # retried, where it was rejected/corrupt
        assert runner.confinement() == "uid+nnp+seccomp+landlock+nproc+subreaper"  # what the probe saw
        assert any("could not apply its confinement" in r.getMessage() for r in caplog.records)
    finally:
        shutdown()


@root_only
def test_layers_switched_off_by_the_setting_are_named_too(monkeypatch) -> None:
    monkeypatch.delenv(ACCEPT, raising=False)
    monkeypatch.setenv(confine.CONFINE_ENV, "uid,seccomp,landlock")
    posture = confine.posture()
    assert posture.state == "degraded: nnp, nproc, subreaper switched off (by AIRLOCK_SANDBOX_CONFINE)"
    assert list(posture.unprotected()) == ["nnp", "nproc", "subreaper"]
    monkeypatch.setenv(confine.CONFINE_ENV, "uid,nnp,seccomp,mountns,nproc,subreaper")  # the fallback, forced
    assert confine.posture().state == "complete: uid+nnp+seccomp+mountns+nproc+subreaper applied"


@pytest.mark.parametrize(
    ("module", "expected"), [("config.settings.base", "uid,nproc"), ("config.settings.production", "")]
)
def test_only_the_embedded_default_accepts_the_root_only_layers_by_default(module: str, expected: str) -> None:
    # A developer's non-root `serve` still decodes (degraded, said in /readyz); production
    # accepts nothing it was not told to.
    env = {k: v for k, v in os.environ.items() if k not in (ACCEPT, "DJANGO_SETTINGS_MODULE")}
    env.update(
        DJANGO_SETTINGS_MODULE=module,
        DJANGO_SECRET_KEY="k" * 10 + "0123456789" * 5,
        DJANGO_ALLOWED_HOSTS="airlock.example.com",
    )
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, django; django.setup(); from django.conf import settings; "
            f"print(repr(os.environ['{ACCEPT}']), ','.join(settings.AIRLOCK_SANDBOX_ACCEPT_MISSING))",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    variable, setting = (out.stdout.rstrip("\n").split(" ", 1) + [""])[:2]
    assert (variable, setting) == (repr(expected), expected)
