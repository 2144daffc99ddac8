"""A resource limit is a verdict only when it trips again on a solo re-run.

Wall clock, CPU, memory and a kill by signal can come from the load beside a job as
much as from its bytes, and a rejection is final. So a job that hits one is run once
more, alone among the jobs of this host: every job holds a shared flock on one file
while it runs, the re-run holds it exclusively. The same bound again is the content's
doing (rejected, the message says so); a success or a content verdict on the re-run
stands; anything else, or no quiet moment within `wait_seconds`, says nothing against
the file: ResourcePressure, which the caller treats as transient (retried, `failed` at
the attempts cap).
"""

from __future__ import annotations

import fcntl
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from .outcome import SandboxResult

log = logging.getLogger("airlock.sandbox")

LOCK_PATH = Path(tempfile.gettempdir()) / "airlock-sandbox-solo.lock"
POLL_SECONDS = 0.05  # flock has no timed wait; a solo re-run is rare


class ResourcePressure(Exception):
    """A resource limit that a quiet re-run did not confirm (or could not get to)."""


@contextmanager
def _flock(path: Path, mode: int, wait_seconds: float | None) -> Iterator[None]:
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as exc:  # no shared lock file: jobs still run, only not alone
        log.warning("sandbox solo lock unavailable", extra={"error": str(exc)})
        yield
        return
    try:
        if wait_seconds is None:
            fcntl.flock(fd, mode)
        else:
            deadline = time.monotonic() + wait_seconds
            while True:
                try:
                    fcntl.flock(fd, mode | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise ResourcePressure("no quiet moment for a solo re-run") from None
                    time.sleep(POLL_SECONDS)
        yield
    finally:
        os.close(fd)  # releases the lock


def run_settled(
    run: Callable[[Path], SandboxResult],
    work_dir: Path,
    *,
    wait_seconds: float,
    lock_path: Path = LOCK_PATH,
) -> SandboxResult:
    """run(work_dir) once; on a resource limit, once more alone (in work_dir/solo)."""
    with _flock(lock_path, fcntl.LOCK_SH, None):
        first = run(work_dir)
    if not first.hit_resource_limit:
        return first
    try:
        with _flock(lock_path, fcntl.LOCK_EX, wait_seconds):
            second = run(work_dir / "solo")
    except ResourcePressure as exc:
        raise ResourcePressure(f"{first.message} under load; {exc}") from None
    if not second.hit_resource_limit:
        return second
    if second.killed_by == first.killed_by:
        return replace(second, message=f"{second.message} (again when run alone)")
    raise ResourcePressure(f"{first.message} under load; alone: {second.message}")
