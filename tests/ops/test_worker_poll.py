"""`rundramatiq` workers look at an idle queue every AIRLOCK_SERVE=worker_poll_ms=…, not Dramatiq's 1 s.

Dramatiq's Redis consumer backs off on an empty queue up to its worker timeout,
which `rundramatiq` cannot set but through Dramatiq's documented
`dramatiq_worker_timeout` variable (default 1000 ms). Each of a file's steps
waits for that pick-up in turn: measured on PostgreSQL + Redis with
`rundramatiq -p 2`, one photo after an idle moment took 948 ms to ready with
the default and 219 ms at 100 ms. The settings pass the value on to the
process `rundramatiq` execs; these tests read it from that process itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.ops.conftest import ROOT
from tests.support.env import with_group_keys

pytestmark = pytest.mark.slow


def _exec_environ(proc: subprocess.Popen, timeout: float = 60.0) -> dict[str, str]:
    """The environment `manage.py rundramatiq` handed to the dramatiq process it exec'd (same pid)."""
    deadline = time.monotonic() + timeout
    proc_dir = Path(f"/proc/{proc.pid}")
    while time.monotonic() < deadline:
        assert proc.poll() is None, "rundramatiq exited before it exec'd dramatiq"
        if b"django_dramatiq.setup" in (proc_dir / "cmdline").read_bytes().split(b"\0"):
            # exec'd: the process is dramatiq's CLI now
            entries = (proc_dir / "environ").read_bytes().split(b"\0")
            return dict(e.decode().split("=", 1) for e in entries if b"=" in e)
        time.sleep(0.05)
    raise AssertionError("rundramatiq did not exec dramatiq in time")


def _rundramatiq_environ(poll_ms: int | None = None, **env: str) -> dict[str, str]:
    base = {
        k: v for k, v in os.environ.items() if k != "dramatiq_worker_timeout" and not k.startswith("AIRLOCK_WORKER")
    }
    with_group_keys(base, "AIRLOCK_SERVE", worker_poll_ms=poll_ms)  # None: the default, whatever os.environ says
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "rundramatiq", "--processes", "1", "--threads", "1"],
        cwd=ROOT,
        env={**base, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        return _exec_environ(proc)
    finally:
        os.killpg(proc.pid, 9)
        proc.wait(timeout=30)


def test_rundramatiq_polls_at_the_default():
    assert _rundramatiq_environ()["dramatiq_worker_timeout"] == "100"


def test_rundramatiq_polls_at_the_setting():
    assert _rundramatiq_environ(poll_ms=250)["dramatiq_worker_timeout"] == "250"


def test_an_operators_own_dramatiq_value_stands():
    environ = _rundramatiq_environ(poll_ms=250, dramatiq_worker_timeout="700")
    assert environ["dramatiq_worker_timeout"] == "700"


def test_a_poll_below_10_ms_is_refused():
    result = subprocess.run(  # noqa: PLW1510 - the returncode is the point
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=with_group_keys(dict(os.environ), "AIRLOCK_SERVE", worker_poll_ms=0),
    )
    assert result.returncode != 0
    assert "AIRLOCK_SERVE worker_poll_ms must be at least 10, not 0" in result.stderr
