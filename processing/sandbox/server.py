"""The fork server: a long-lived, single-threaded process that forks one job per request.

Why our own instead of multiprocessing's forkserver: we need the exit status and
rusage of each job (segfault vs CPU limit vs memory), a deadline enforced by the
process that can reap (no PID-reuse race when killing), bounded result sizes, and no
re-import of the caller's __main__ in every child.

Latency: one spare job process is always forked and prepared ahead of time (see
child.py), and a job is answered as soon as its length-prefixed result is complete,
without waiting for its exit; a job that dies without a complete result is answered
when it is reaped, with its exit status.

It is started by runner.py with `python -I`, a minimal environment and stdin as a
lifeline: EOF on stdin (the worker exited or called shutdown()) kills every job and
exits. Clients connect to a Unix socket in a 0700 directory, send one JSON line, and
read back one header line (status, timeout flag) followed by the result document.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from .child import confine_environment, spare_main
from .limits import MAX_RESULT_BYTES
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
    conn: socket.socket | None
    result_fd: int | None
    deadline: float
    started: float
    result: bytearray = field(default_factory=bytearray)
    oversized: bool = False
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
                else:
                    kind, pid = key.data
                    if (job := self.jobs.get(pid)) is not None:
                        self._on_result(job) if kind == "result" else self._on_client(job)
            self._enforce_deadlines()
            self._reap()
            if self.spare is None and self.idle_spare_deaths < 3:  # no fork loop if broken
                self._fork_spare()  # while the job just handed over runs on another core

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
        os.set_blocking(res_r, False)
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
        try:
            os.write(spare.request_fd, raw)  # a few hundred bytes: fits the pipe buffer
        except OSError:
            pass  # the spare died: the job is reaped below and answered with its status
        os.close(spare.request_fd)
        now = time.monotonic()
        job = Job(spare.pid, conn, spare.result_fd, now + wall, now)
        self.jobs[spare.pid] = job
        self.sel.register(spare.result_fd, selectors.EVENT_READ, ("result", spare.pid))
        self.sel.register(conn, selectors.EVENT_READ, ("client", spare.pid))

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

    def _on_result(self, job: Job, final: bool = False) -> None:
        assert job.result_fd is not None
        try:
            chunk = os.read(job.result_fd, 65536)
        except BlockingIOError:
            if final:  # reaped already; a killed straggler may still hold the write end
                self._close_result(job)
            return
        if not chunk or len(job.result) + len(chunk) > MAX_RESULT_BYTES + 4:
            job.oversized = bool(chunk)  # stop reading: the writer gets EPIPE
            self._close_result(job)
            return
        job.result += chunk
        if self._complete(job) is not None and not final:
            self._answer(job, {"complete": True})  # no need to wait for the exit

    @staticmethod
    def _complete(job: Job) -> bytes | None:
        if len(job.result) < 4:
            return None
        size = int.from_bytes(job.result[:4], "big")
        return bytes(job.result[4 : 4 + size]) if len(job.result) - 4 == size else None

    def _close_result(self, job: Job) -> None:
        if job.result_fd is not None:
            self.sel.unregister(job.result_fd)
            os.close(job.result_fd)
            job.result_fd = None

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
            job = self.jobs.pop(pid)
            while job.result_fd is not None:  # drain what it wrote before it exited
                self._on_result(job, final=True)
            self._answer(
                job,
                {
                    "complete": self._complete(job) is not None,
                    "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                    "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                    "maxrss_kb": usage.ru_maxrss,
                    "cpu_seconds": usage.ru_utime + usage.ru_stime,
                },
            )

    def _answer(self, job: Job, status: dict[str, Any]) -> None:
        if job.conn is None:
            return  # answered already, or the client is gone
        conn, job.conn = job.conn, None
        status.update(
            timed_out=job.timed_out,
            oversized=job.oversized,
            wall_seconds=time.monotonic() - job.started,
        )
        body = self._complete(job) or b""
        self.idle_spare_deaths = 0
        self.sel.unregister(conn)
        try:
            conn.settimeout(5.0)
            conn.sendall(json.dumps(status).encode() + b"\n" + body)
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
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    server.serve_forever()
