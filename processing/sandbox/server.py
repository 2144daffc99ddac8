"""The fork server: a long-lived, single-threaded process that forks one job per request.

Why our own instead of multiprocessing's forkserver: we need the exit status and
rusage of each job (segfault vs CPU limit vs memory), a deadline enforced by the
process that can reap (no PID-reuse race when killing), and no re-import of the
caller's __main__ in every child.

Protocol: clients connect to a Unix socket in a 0700 directory and send one JSON line.
The server hands the request to a job process and passes the read end of that job's
result pipe to the client (SCM_RIGHTS, with one byte). The client reads the job's
length-prefixed result document straight from the pipe, without a relay through this
process (one process wakeup and two copies less per job); if the pipe ends without a
complete document, the client reads one status line from the socket, which the server
sends once it has reaped the job (exit code or signal, rusage, timeout flag). A client
that hangs up gets its job killed: after a complete result that is just a faster exit.

Latency: one spare job process is forked and prepared ahead of time (see child.py).
With a single job in flight, the next spare is forked only once its client has its
result: on two cores, forking and warming it while the job ran took the core that the
job's and the worker's wakeups needed (~2 ms a job). A request that finds no spare
forks one then.

It is started by runner.py with `python -I`, a minimal environment and stdin as a
lifeline: EOF on stdin (the worker exited or called shutdown()) kills every job and
exits.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import sys
import time
import zlib
from dataclasses import dataclass
from typing import Any

from .child import confine_environment, spare_main
from .warmup import preload

MAX_REQUEST_BYTES = 64 << 10


@dataclass
class Spare:
    pid: int
    request_fd: int
    result_fd: int


@dataclass
class Job:
    pid: int
    conn: socket.socket | None  # None once answered or once the client hung up
    deadline: float
    started: float
    timed_out: bool = False


def _kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)  # os.kill covers a job that has not setpgid yet
        except (ProcessLookupError, PermissionError):
            pass


class Server:
    def __init__(self, sock_path: str) -> None:
        self.jobs: dict[int, Job] = {}
        self.spare: Spare | None = None
        self.idle_spare_deaths = 0  # spares that died before getting a job (should be 0)
        self.sel = selectors.DefaultSelector()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(sock_path)
        self.listener.listen(128)
        self.wake_r, wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # the wakeup fd does the work
        self.sel.register(self.listener, selectors.EVENT_READ, "accept")
        self.sel.register(sys.stdin.fileno(), selectors.EVENT_READ, "lifeline")
        self.sel.register(self.wake_r, selectors.EVENT_READ, "wake")

    def serve_forever(self) -> None:
        self._fork_spare()
        while True:
            deadlines = [j.deadline for j in self.jobs.values() if not j.timed_out]
            timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
            for key, _ in self.sel.select(timeout):
                if key.data == "accept":
                    self._accept()
                elif key.data == "lifeline":
                    if not os.read(key.fd, 4096):
                        return self._stop()
                elif key.data == "wake":
                    self._drain_wakeups()
                elif (job := self.jobs.get(key.data)) is not None:
                    self._on_client(job)
            self._enforce_deadlines()
            self._reap()
            if self.spare is None and self.idle_spare_deaths < 3 and self._time_to_fork():
                self._fork_spare()  # the cap stops a fork loop if spares keep dying

    def _time_to_fork(self) -> bool:
        waiting = sum(1 for job in self.jobs.values() if job.conn is not None)
        # No client waits: its result is read (a finished job tearing down runs at nice 19)
        # and the fork overlaps the worker's own work. Two or more: no idle moment is
        # coming, and the next request would otherwise fork on its critical path.
        return waiting != 1

    def _fork_spare(self) -> None:
        req_r, req_w = os.pipe()
        res_r, res_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the job process
            os.close(req_w)
            os.close(res_r)
            spare_main(req_r, res_w)
        os.close(req_r)
        os.close(res_w)
        self.spare = Spare(pid, req_w, res_r)

    def _drain_wakeups(self) -> None:
        try:
            while os.read(self.wake_r, 4096):
                pass
        except BlockingIOError:
            pass

    def _accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        try:
            conn.settimeout(5.0)  # the client sends its request right after connecting
            raw = b""
            while not raw.endswith(b"\n") and len(raw) < MAX_REQUEST_BYTES:
                if not (chunk := conn.recv(MAX_REQUEST_BYTES)):
                    break
                raw += chunk
            wall = float(json.loads(raw)["limits"]["wall_seconds"])
        except (OSError, ValueError, KeyError, TypeError):
            conn.close()
            return
        spare, self.spare = self._live_spare(), None
        now = time.monotonic()
        try:
            os.write(spare.request_fd, raw)  # a few hundred bytes: fits the pipe buffer
        except OSError:
            pass  # the spare died: the job is reaped below and answered with its status
        os.close(spare.request_fd)
        try:
            socket.send_fds(conn, [b"R"], [spare.result_fd])
        except OSError:
            pass  # the client is gone: _on_client kills the job
        os.close(spare.result_fd)  # the job's write end and the client's read end remain
        self.jobs[spare.pid] = Job(spare.pid, conn, now + wall, now)
        self.sel.register(conn, selectors.EVENT_READ, spare.pid)

    def _live_spare(self) -> Spare:
        # A spare killed from outside must not turn into a "crashed decoder" verdict.
        if self.spare is not None and self._exited(self.spare.pid):
            self._reap()
        if self.spare is None:
            self._fork_spare()
        assert self.spare is not None
        return self.spare

    @staticmethod
    def _exited(pid: int) -> bool:
        try:
            return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return False

    def _on_client(self, job: Job) -> None:
        assert job.conn is not None
        try:
            gone = not job.conn.recv(1)
        except OSError:
            gone = True
        if gone:  # the caller gave up (thread killed, worker exiting): stop wasting CPU
            self.sel.unregister(job.conn)
            job.conn.close()
            job.conn = None
            _kill_group(job.pid)

    def _enforce_deadlines(self) -> None:
        now = time.monotonic()
        for job in self.jobs.values():
            if not job.timed_out and now >= job.deadline:
                job.timed_out = True  # only matters if it has not been answered yet
                _kill_group(job.pid)  # still our unreaped child: the pid cannot be reused

    def _reap(self) -> None:
        pids = list(self.jobs) + ([self.spare.pid] if self.spare else [])
        for pid in pids:
            if not self._exited(pid):
                continue
            _kill_group(pid)  # leftovers (a render sub-child) die while the pgid is still ours
            _, status, usage = os.wait4(pid, 0)
            if self.spare is not None and pid == self.spare.pid:
                os.close(self.spare.request_fd)
                os.close(self.spare.result_fd)
                self.spare = None
                self.idle_spare_deaths += 1
                continue
            self.idle_spare_deaths = 0
            self._answer(
                self.jobs.pop(pid),
                {
                    "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                    "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                    "maxrss_kb": usage.ru_maxrss,
                    "cpu_seconds": usage.ru_utime + usage.ru_stime,
                },
            )

    def _answer(self, job: Job, status: dict[str, Any]) -> None:
        if job.conn is None:
            return  # the client is gone (having read a complete result, or given up)
        conn, job.conn = job.conn, None
        status.update(timed_out=job.timed_out, wall_seconds=time.monotonic() - job.started)
        self.sel.unregister(conn)
        try:
            conn.settimeout(5.0)
            conn.sendall(json.dumps(status).encode() + b"\n")
        except OSError:
            pass
        finally:
            conn.close()

    def _stop(self) -> None:
        pids = list(self.jobs) + ([self.spare.pid] if self.spare else [])
        for pid in pids:
            _kill_group(pid)
        for pid in pids:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def serve(sock_path: str) -> None:
    """Entry point of the fork-server process."""
    preload()
    confine_environment()  # once here, so every job inherits it (the job re-checks the env)
    server = Server(sock_path)
    sys.stdout.write(f"ready zlib={zlib.ZLIB_RUNTIME_VERSION}\n")  # the library the loader found
    sys.stdout.flush()
    server.serve_forever()
