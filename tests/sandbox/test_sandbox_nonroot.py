"""A worker that is not root still confines its jobs (nnp, seccomp, Landlock or the
mount-namespace fallback, the subreaper) and says so.

CI and this machine run the tests as root, so a subprocess becomes `nobody` before it
starts the sandbox and runs the hostile job kind from there. The jobs then share the
worker's uid: only the filesystem layer and seccomp keep them from its files and sockets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sandbox.helpers import SHOW_TO_NOBODY
from tests.sandbox.jobkinds import ESCAPES

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534

# Runs as root, then as nobody (helpers.SHOW_TO_NOBODY: the interpreter and the checkout
# stay reachable for nobody).
_SCRIPT = (
    SHOW_TO_NOBODY
    + r"""
import json, socket
sys.path.insert(0, sys.argv[1])
confine_value, nobody, accept = sys.argv[2], int(sys.argv[3]), sys.argv[4]
os.setgroups([])
os.setresgid(nobody, nobody, nobody)
os.setresuid(nobody, nobody, nobody)
os.environ["AIRLOCK_SANDBOX_CONFINE"] = confine_value
os.environ["AIRLOCK_SANDBOX_ACCEPT_MISSING"] = accept
os.environ["AWS_SECRET_ACCESS_KEY"] = "worker-secret-do-not-leak"
os.environ["TMPDIR"] = tempfile.mkdtemp(dir="/tmp")  # ours, 0700

from pathlib import Path
from processing.sandbox import confine, run_job, runner
from tests.sandbox import jobkinds
jobkinds.install()

home = Path(os.environ["TMPDIR"])
secret = home / "var"
(secret / "storage").mkdir(parents=True, mode=0o700)
database, stored = secret / "airlock.sqlite3", secret / "storage" / "other-tenant.pdf"
for f in (database, stored):
    f.write_bytes(b"private")
    f.chmod(0o600)
outside = home / "outside"
outside.mkdir()
tcp = socket.create_server(("127.0.0.1", 0))
unix = socket.socket(socket.AF_UNIX)
unix.bind(str(home / "broker.sock"))
unix.listen()
src = home / "input"
probe = {"tcp_port": tcp.getsockname()[1], "unix_socket": str(home / "broker.sock"), "worker_pid": os.getpid(),
         "database": str(database), "storage_root": str(secret / "storage"), "stored_file": str(stored),
         "outside_dir": str(outside), "forks": 10}
src.write_text(json.dumps(probe))
result = run_job("_test_escape", src, home / "work")
print(json.dumps({"worker_uid": os.geteuid(), "reported": runner.confinement(),
                  "in_force": confine.describe(confine.in_force()), "outcome": result.outcome,
                  "message": result.message, "data": result.data}))
runner.shutdown()
"""
)


def _as_nobody(confine_value: str, accept: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(ROOT), confine_value, str(NOBODY), accept],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(os.geteuid() != 0, reason="becoming another user needs root (CI and this machine run as root)")
@pytest.mark.parametrize(
    ("value", "accept", "expected"),
    [
        # "all" asks for uid and nproc too, which only root can apply: accepted explicitly.
        ("all", "uid,nproc", "nnp+seccomp+landlock+subreaper"),
        ("nnp,seccomp,mountns,subreaper", "", "nnp+seccomp+mountns+subreaper"),
    ],
    ids=["landlock", "mountns"],
)
def test_a_non_root_worker_confines_its_jobs_and_says_so(value: str, accept: str, expected: str) -> None:
    from processing.sandbox import confine

    if "landlock" in expected and confine.landlock_abi() < 1:
        pytest.skip("this kernel has no Landlock")  # CI's has ABI 7 (STACK-NOTES)
    got = _as_nobody(value, accept)
    assert got["worker_uid"] == NOBODY
    assert got["reported"] == got["in_force"] == expected  # what the fork server applied = what /readyz says
    assert got["outcome"] == "ok", got["message"]
    data = got["data"]
    assert data["uid"] == NOBODY  # no uid of its own to drop to: the worker's
    # All but signal_worker: the worker shares its uid, so only Landlock can stop that one.
    escapes = [n for n in ESCAPES if n != "signal_worker"]
    if "landlock" in expected and confine.landlock_abi() >= 6:
        escapes.append("signal_worker")  # same uid: only Landlock's signal scoping stops it
    worked = {n: data[n] for n in escapes if data[n] == "ok"}
    assert not worked, f"escapes that worked: {worked}"
    caps = data["capabilities"]
    assert {caps[k] for k in ("CapInh", "CapPrm", "CapEff", "CapAmb")} == {"0000000000000000"}
