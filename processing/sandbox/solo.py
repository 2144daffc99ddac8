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
# A solo re-run stops every other job of the host while it runs. So that files which
# trip their limits on purpose (one tenant's timeout bombs) cannot keep the host in
# re-runs, after one that took d seconds the next may start only SPACING × d later
# (the host is then alone at most 1/(1+SPACING) of the time); until then a limit is
# transient: retried later, `failed` at the attempts cap, never served.
SPACING = 3.0


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
    lock_path: Path | None = None,
) -> SandboxResult:
    """run(work_dir) once; on a resource limit, once more alone (in work_dir/solo)."""
    lock_path = lock_path or LOCK_PATH
    with _flock(lock_path, fcntl.LOCK_SH, None):
        first = run(work_dir)
    if not first.hit_resource_limit:
        return first
    budget = lock_path.with_suffix(".next")  # its mtime: when the next re-run may start
    if _not_before(budget) > time.time():
        raise ResourcePressure(f"{first.message} under load; another solo re-run ran just before")
    try:
        with _flock(lock_path, fcntl.LOCK_EX, wait_seconds):
            started = time.time()
            try:
                second = run(work_dir / "solo")
            finally:
                _set_not_before(budget, time.time() + SPACING * (time.time() - started))
    except ResourcePressure as exc:
        raise ResourcePressure(f"{first.message} under load; {exc}") from None
    if not second.hit_resource_limit:
        return second
    if second.killed_by == first.killed_by:
        return replace(second, message=f"{second.message} (again when run alone)")
    raise ResourcePressure(f"{first.message} under load; alone: {second.message}")


def _not_before(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _set_not_before(path: Path, when: float) -> None:
    try:
        path.touch(mode=0o666)
        os.utime(path, (when, when))
    except OSError as exc:  # no budget file: re-runs are then unspaced, never refused
        log.warning("sandbox solo budget unavailable", extra={"error": str(exc)})
