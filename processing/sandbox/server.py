"""The fork server: a long-lived, single-threaded process that forks one job per request.

Why our own instead of multiprocessing's forkserver: we need the exit status and
rusage of each job (segfault vs CPU limit vs memory), a deadline enforced by the
process that can reap (no PID-reuse race when killing), and no re-import of the
caller's __main__ in every child.

Protocol: clients connect to a Unix socket in a 0700 directory and send one JSON line.
The server opens the request's input file and work dir itself (as the worker's user:
a job that dropped its uid could not, and a Landlock-confined one has no path to them)
and hands both fds with the request to a job process over a socketpair, then passes the
read end of that job's result pipe to the client (SCM_RIGHTS, with one byte). The client reads the job's
length-prefixed result document straight from the pipe, without a relay through this
process (one process wakeup and two copies less per job); if the pipe ends without a
complete document, the client reads one status line from the socket, which the server
sends once it has reaped the job (exit code or signal, rusage, timeout flag). A client
that hangs up gets its job killed: after a complete result that is just a faster exit.

Latency: one spare job process is forked and prepared ahead of time (see child.py).
With a single job in flight, the next spare is forked only once its client has its
result (forking it during the job took the core the job's wakeups needed); a request
that finds no spare forks one then.

It is started by runner.py with `python -I`, a minimal environment and stdin as a
lifeline: EOF on stdin (the worker exited or called shutdown()) kills every job and
exits. It is non-dumpable (no job can read its /proc files) and a child subreaper: what
a job leaves outside its process group is re-parented here and killed (_sweep_strays).
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

from . import confine
from .child import CONFINED, CONFINEMENT, confine_environment, spare_main
from .warmup import preload

MAX_REQUEST_BYTES = 64 << 10
MEMBER_RULES_ENV = "AIRLOCK_SANDBOX_YARA_RULES"


STRAY_SWEEP_INTERVAL = 0.25  # seconds between /proc sweeps while jobs keep finishing
SWEEP_SPAN = 4096  # pids looked at one by one; past that a sweep lists /proc


def _last_pid() -> int | None:
    try:
        with open("/proc/sys/kernel/ns_last_pid", "rb") as fh:
            return int(fh.read())
    except (OSError, ValueError):
        return None


@dataclass
class Spare:
    pid: int
    request: socket.socket  # the server's end; fds travel with the request (SCM_RIGHTS)
    result_fd: int


@dataclass
class Job:
    pid: int
    conn: socket.socket | None  # None once answered or once the client hung up
    deadline: float
    started: float
    request: socket.socket  # the job says on it that it is confined (child._report_confined)
    timed_out: bool = False


def _tgid_and_ppid(pid: int) -> tuple[int, int]:
    with open(f"/proc/{pid}/status", "rb") as fh:
        fields = dict(line.split(b":", 1) for line in fh.read().splitlines() if b":" in line)
    return int(fields[b"Tgid"]), int(fields[b"PPid"])


def _kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)  # os.kill covers a job that has not setpgid yet
        except (ProcessLookupError, PermissionError):
            pass


class Server:
    def __init__(self, sock_path: str, *, subreaper: bool = False) -> None:
        self.subreaper = subreaper
        self.sweep_due = float("inf")
        self.sweep_from = _last_pid()  # no process of ours has a pid at or below this
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
            if self.sweep_due != float("inf"):
                deadlines.append(self.sweep_due)
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
            if self.subreaper and time.monotonic() >= self.sweep_due:
                self._sweep_strays()
            if self.spare is None and self.idle_spare_deaths < 3 and self._time_to_fork():
                self._fork_spare()  # the cap stops a fork loop if spares keep dying

    def _time_to_fork(self) -> bool:
        waiting = sum(1 for job in self.jobs.values() if job.conn is not None)
        # No client waits: its result is read (a finished job tearing down runs at nice 19)
        # and the fork overlaps the worker's own work. Two or more: no idle moment is
        # coming, and the next request would otherwise fork on its critical path.
        return waiting != 1

    def _fork_spare(self) -> None:
        req_server, req_job = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        res_r, res_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the job process
            req_server.close()
            os.close(res_r)
            spare_main(req_job.detach(), res_w)
        req_job.close()
        os.close(res_w)
        self.spare = Spare(pid, req_server, res_r)

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
        fds: list[int] = []
        try:
            conn.settimeout(5.0)  # the client sends its request right after connecting
            raw = b""
            while not raw.endswith(b"\n") and len(raw) < MAX_REQUEST_BYTES:
                if not (chunk := conn.recv(MAX_REQUEST_BYTES)):
                    break
                raw += chunk
            request = json.loads(raw)
            wall = float(request["limits"]["wall_seconds"])
            # Opened here, by the server: a job that dropped its uid could not open a
            # 0600 file, and a Landlock-confined one has no path to it at all.
            fds.append(os.open(request["input"], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC))
            fds.append(os.open(request["work_dir"], os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC))
        except (OSError, ValueError, KeyError, TypeError):
            for fd in fds:
                os.close(fd)
            conn.close()
            return
        spare, self.spare = self._live_spare(), None
        now = time.monotonic()
        try:
            socket.send_fds(spare.request, [raw], fds)  # a few hundred bytes: one message
        except OSError:
            pass  # the spare died: the job is reaped below and answered with its status
        for fd in fds:
            os.close(fd)
        try:
            spare.request.shutdown(socket.SHUT_WR)  # end of request; the job answers CONFINED here
        except OSError:
            pass
        try:
            socket.send_fds(conn, [b"R"], [spare.result_fd])
        except OSError:
            pass  # the client is gone: _on_client kills the job
        os.close(spare.result_fd)  # the job's write end and the client's read end remain
        self.jobs[spare.pid] = Job(spare.pid, conn, now + wall, now, spare.request)
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
                self.sweep_due = now  # and whatever it started outside its group

    def _reap(self) -> None:
        pids = list(self.jobs) + ([self.spare.pid] if self.spare else [])
        for pid in pids:
            if not self._exited(pid):
                continue
            _kill_group(pid)  # leftovers (a render sub-child) die while the pgid is still ours
            _, status, usage = os.wait4(pid, 0)
            self.sweep_due = min(self.sweep_due, time.monotonic() + STRAY_SWEEP_INTERVAL)
            if self.spare is not None and pid == self.spare.pid:
                self.spare.request.close()
                os.close(self.spare.result_fd)
                self.spare = None
                self.idle_spare_deaths += 1
                continue
            self.idle_spare_deaths = 0
            job = self.jobs.pop(pid)
            self._answer(
                job,
                {
                    "confined": self._confined(job),
                    "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                    "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                    "maxrss_kb": usage.ru_maxrss,
                    "cpu_seconds": usage.ru_utime + usage.ru_stime,
                },
            )

    @staticmethod
    def _confined(job: Job) -> bool:
        """Whether the (reaped) job said it was confined before it read its input."""
        try:
            said = job.request.recv(len(CONFINED), socket.MSG_DONTWAIT)
        except OSError:
            said = b""
        job.request.close()
        return said == CONFINED

    def _sweep_strays(self) -> None:
        """Kill and reap every child that is neither a job nor the spare.

        As a subreaper, the server inherits whatever a job left behind outside its
        process group (setsid, then the job exited or was killed). The kernel lists a
        process's children nowhere cheaper than /proc: only the pids allocated since the
        oldest job still able to leave one are looked at (pids are handed out in order),
        all of /proc after a wrap or a fork storm. Runs at most every
        STRAY_SWEEP_INTERVAL while jobs finish, at once after a deadline kill, and again
        until a sweep finds nothing.
        """
        self.sweep_due = float("inf")
        me, known = os.getpid(), set(self.jobs) | ({self.spare.pid} if self.spare else set())
        last = _last_pid()
        if last is not None and self.sweep_from is not None and 0 <= last - self.sweep_from <= SWEEP_SPAN:
            candidates: Any = range(self.sweep_from + 1, last + 1)
        else:
            candidates = (int(name) for name in os.listdir("/proc") if name.isdigit())
        found = False
        for pid in candidates:
            if pid in known:
                continue
            try:
                tgid, ppid = _tgid_and_ppid(pid)
            except (OSError, ValueError, KeyError):
                continue
            # A job's thread has a /proc entry too, naming the job's parent (us) as its
            # ppid: killing it would kill the job. Only a whole process can be a stray.
            if tgid == pid and ppid == me:
                found = True
                _kill_group(pid)
                try:
                    os.waitpid(pid, os.WNOHANG)  # or on a later sweep, once it is dead
                except ChildProcessError:
                    pass
        if found:
            self.sweep_due = time.monotonic() + 0.05  # until every stray is reaped
        elif last is not None:
            # Next time, start below every job still running (its descendants are not
            # orphans yet) and the spare; a wrap (last < start) means a full scan.
            self.sweep_from = min([last, *(pid - 1 for pid in known)])

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


def _decide_confinement(layers: tuple[str, ...]) -> tuple[str, ...]:
    """Fill child.CONFINEMENT (inherited by every job) with the layers this host allows."""
    conf = CONFINEMENT
    conf.layers = layers
    if "uid" in layers:
        conf.uid, conf.gid = confine.sandbox_ids()
        conf.cap_last = confine.cap_last()
    conf.nproc = int(os.environ.get("AIRLOCK_SANDBOX_NPROC") or 128)
    if "landlock" in layers:
        conf.landlock_abi = confine.landlock_abi()
        conf.read_fds = confine.open_read_roots()
    if "seccomp" in layers:
        conf.seccomp = confine.build_seccomp()
    if "mountns" in layers:
        conf.cap_last = confine.cap_last()
        conf.mount_roots = confine.read_roots()
        conf.new_root = os.path.abspath("root")  # in our private 0700 dir (runner.py's cwd for us)
        os.mkdir(conf.new_root, 0o700)
    if "subreaper" in layers:
        confine.make_subreaper()
    if {"nnp", "uid"} & set(layers):
        confine.make_undumpable()  # no job can read this process's /proc/<pid>/environ or mem
    return layers


def _load_member_rules() -> str:
    """Compile the YARA rules archive members are scanned with (AIRLOCK_SANDBOX_YARA_RULES)."""
    from . import child

    rules_dir = os.environ.get(MEMBER_RULES_ENV, "")
    if rules_dir:
        from pathlib import Path

        from processing.scanners.yara import load_rules  # yara-x only: no Django

        child.MEMBER_RULES = load_rules(Path(rules_dir))  # a broken rule stops the server
    return rules_dir


def serve(sock_path: str) -> None:
    """Entry point of the fork-server process."""
    # Fail closed, before anything else is loaded: a layer this host cannot apply, and
    # that AIRLOCK_SANDBOX_ACCEPT_MISSING does not accept, means no job runs at all.
    posture = confine.posture()  # reads AIRLOCK_SANDBOX_*: before the scrub below
    if posture.refused:
        sys.stdout.write(f"refused {posture.state}\n")
        sys.stdout.flush()
        return
    preload()
    _load_member_rules()
    layers = _decide_confinement(posture.in_force)
    confine_environment()  # once here, so every job inherits it (the job re-checks the env)
    server = Server(sock_path, subreaper="subreaper" in layers)
    # The library the loader found, the confinement every job gets, and what it lacks.
    sys.stdout.write(
        f"ready zlib={zlib.ZLIB_RUNTIME_VERSION} confinement={confine.describe(layers)} state={posture.state}\n"
    )
    sys.stdout.flush()
    server.serve_forever()
