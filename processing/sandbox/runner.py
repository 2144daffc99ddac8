"""The worker side: start the fork server lazily, send jobs, classify what comes back.

Safe to call from many threads: each call has its own socket; only starting or
replacing the server is serialised. Each call reads its job's result straight from the
job's pipe (handed over by the server) and bounds its size itself. The worker itself
never forks (forking a multi-threaded process can deadlock the child on a lock some
other thread held): the server is started with subprocess, i.e. fork+exec.

Contract: run_job raises SandboxUnavailable only when the machinery cannot start or
stops answering (infrastructure, retried by the caller). Whatever the job process does
(crash, limits, garbage) comes back as a SandboxResult: rejected/corrupt, or
rejected/timeout for the CPU and wall-clock limits.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from . import confine
from .classify import classify
from .kinds import KINDS
from .limits import MAX_RESULT_BYTES, Bounds, Limits, to_dict
from .outcome import SandboxResult

START_TIMEOUT = 60.0  # first start imports Pillow, pypdf, PDFium
ANSWER_GRACE = 15.0  # past the job's own deadline, the server itself is considered stuck
# The fork server's program: argv[1] is the checkout to import from, argv[2] the socket it listens on.
_BOOT = "import sys; sys.path.insert(0, sys.argv[1]); from processing.sandbox.server import serve; serve(sys.argv[2])"


ZLIB_DIR_ENV = "AIRLOCK_SANDBOX_ZLIB_DIR"
BUILT_ZLIB_DIR = Path(sys.prefix) / "lib" / "airlock-zlib-ng"  # scripts/build-zlib-ng.sh

logger = logging.getLogger(__name__)


class SandboxUnavailable(Exception):
    """The sandbox machinery could not start or stopped answering (infrastructure)."""


def decoder_zlib_dir() -> Path | None:
    """The directory whose libz.so.1 the decoders load instead of the system's, or None.

    Inflating is most of a PNG decode and much of a PDF's, and zlib-ng (zlib-compatible
    build) does it about twice as fast as the system zlib (docs/performance.md). AIRLOCK_SANDBOX_ZLIB_DIR
    names a directory holding such a libz.so.1, "system" keeps the system zlib, and
    unset takes scripts/build-zlib-ng.sh's build when there is one. Only the fork server
    (and so every job) loads it; the worker keeps the system zlib.
    """
    value = os.environ.get(ZLIB_DIR_ENV, "").strip()
    if value == "system":
        return None
    path = Path(value) if value else BUILT_ZLIB_DIR
    if (path / "libz.so.1").is_file():
        return path.resolve()
    if value:
        # A named library that is not there is a deployment error, not a reason to
        # quietly decode with something else.
        raise SandboxUnavailable(f"{ZLIB_DIR_ENV}={value}: no libz.so.1 in that directory")
    return None


class _NoAnswer(Exception):
    """The fork server broke the protocol (closed early, sent garbage): replace it."""


class _ForkServer:
    def __init__(self, member_rules: Path | None = None) -> None:
        zlib_dir = decoder_zlib_dir()  # raises before anything needs cleaning up
        self.member_rules = member_rules
        self.owner_pid = os.getpid()
        self.users = 0  # run_job calls between taking this server and reading its answer (under _lock)
        self.dir = tempfile.mkdtemp(prefix="airlock-sandbox-")  # 0700: only we can connect
        self.sock_path = os.path.join(self.dir, "fork.sock")
        root = str(Path(__file__).resolve().parents[2])
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            # Every job's heap is faulted in afresh: transparent huge pages make that cheaper.
            "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1",
        }
        if zlib_dir is not None:
            env["LD_LIBRARY_PATH"] = str(zlib_dir)  # read once by the loader at exec
        if member_rules is not None:
            env["AIRLOCK_SANDBOX_YARA_RULES"] = str(member_rules)  # compiled once, by the server
        for name in (
            confine.CONFINE_ENV,
            confine.ACCEPT_ENV,
            confine.UID_ENV,
            confine.GID_ENV,
            "AIRLOCK_SANDBOX_NPROC",
        ):
            if os.environ.get(name):
                env[name] = os.environ[name]
        try:
            self.proc = subprocess.Popen(
                # -I: no PYTHON* variables, no user site; -B mirrors the worker's own setting
                [
                    sys.executable,
                    "-I",
                    *(["-B"] if sys.flags.dont_write_bytecode else []),
                    "-c",
                    _BOOT,
                    root,
                    self.sock_path,
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
                cwd=self.dir,
                close_fds=True,
                start_new_session=True,  # not hit by the worker's Ctrl-C
            )
        except OSError as exc:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise SandboxUnavailable(f"cannot start the fork server: {exc}") from exc
        assert self.proc.stdout is not None
        poller = select.poll()  # not select(): the worker may hold fds above FD_SETSIZE
        poller.register(self.proc.stdout, select.POLLIN)
        line = self.proc.stdout.readline() if poller.poll(START_TIMEOUT * 1000) else b""
        text = line.decode("ascii", "replace").strip()
        if text.startswith("refused "):
            # A requested confinement layer cannot be applied here and nobody accepted its
            # absence (confine.posture): no job runs, each one is retried as infrastructure.
            self.stop()
            state = text.removeprefix("refused ")
            logger.error("sandbox fork server not started, confinement %s", state, extra={"confinement_state": state})
            raise SandboxUnavailable(f"confinement {state}")
        word, _, rest = text.partition(" zlib=")
        zlib_version, _, rest = rest.partition(" confinement=")
        confinement, _, state = rest.partition(" state=")
        if word != "ready":
            self.stop()
            where = f" (with {ZLIB_DIR_ENV}={zlib_dir})" if zlib_dir else ""
            raise SandboxUnavailable(f"the fork server did not start{where}")
        self.zlib_version = zlib_version
        self.confinement = confinement or "none"
        # Jobs that drop to the sandbox uid need their work dir to be theirs.
        self.job_ids = confine.sandbox_ids() if "uid" in self.confinement.split("+") else None
        self.state = state
        # Degraded (a layer missing, accepted by AIRLOCK_SANDBOX_ACCEPT_MISSING): a warning.
        (logger.info if state.startswith("complete") else logger.warning)(
            "sandbox fork server %s started, decoders use zlib %s, confinement %s (%s)",
            self.proc.pid,
            zlib_version,
            self.confinement,
            state,
            extra={"confinement": self.confinement, "confinement_state": state},
        )

    def alive(self) -> bool:
        return self.owner_pid == os.getpid() and self.proc.poll() is None

    def stop(self) -> None:
        if self.owner_pid != os.getpid():
            return  # a forked copy of the worker must not stop its parent's server
        if self.proc.stdin:
            try:
                self.proc.stdin.close()  # lifeline EOF: the server kills its jobs and exits
            except OSError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        shutil.rmtree(self.dir, ignore_errors=True)


_lock = threading.Lock()
_server: _ForkServer | None = None
# Replaced for other archive-member rules while other threads' jobs still ran on them:
# each stops once its last job is answered (_release).
_retired: list[_ForkServer] = []
_atexit_registered = False


_ANY = object()


def _current_server(member_rules: Any = _ANY, *, use: bool = False) -> _ForkServer:
    """The live server; replaced if a caller needs other archive-member rules than it has.

    `use`: the caller runs a job on it and calls _release when it has its answer. A
    server replaced for other rules is not stopped under the jobs other threads run on
    it (a photo's, a transcode's): it is retired and stops after the last of them.
    """
    global _server, _atexit_registered
    with _lock:
        stale = _server is not None and member_rules is not _ANY and _server.member_rules != member_rules
        if _server is None or not _server.alive() or stale:
            if _server is not None and _server.owner_pid == os.getpid():
                if stale and _server.users and _server.alive():
                    _retired.append(_server)
                else:
                    _server.stop()
            _server = _ForkServer(None if member_rules is _ANY else member_rules)
            if not _atexit_registered:
                atexit.register(shutdown)
                _atexit_registered = True
        if use:
            _server.users += 1
        return _server


def _release(server: _ForkServer) -> None:
    """A job's caller is done with `server`; a retired server stops after its last job."""
    with _lock:
        server.users -= 1
        last = server.users == 0 and server in _retired
        if last:
            _retired.remove(server)
    if last:
        server.stop()


def _drop_server(server: _ForkServer) -> None:
    global _server
    with _lock:
        if _server is server:  # another thread may already have replaced it
            _server = None
            server.stop()


def shutdown() -> None:
    """Stop the fork server and every job it runs (tests, process exit), retired servers too."""
    global _server
    with _lock:
        servers = [s for s in (_server, *_retired) if s is not None]
        _server = None
        _retired.clear()
    for server in servers:
        server.stop()


def confinement() -> str:
    """The confinement every job gets, e.g. "uid+nnp+seccomp+landlock+nproc+subreaper"."""
    return _current_server().confinement


def decoder_zlib_version() -> str:
    """The zlib version every job process inflates with (starts the server if needed)."""
    return _current_server().zlib_version


def server_cpu_seconds() -> float | None:
    """CPU used so far by the fork server and every job it has reaped (for benchmarks)."""
    with _lock:
        server = _server
    if server is None or not server.alive():
        return None
    try:
        fields = Path(f"/proc/{server.proc.pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    # utime, stime, cutime, cstime: fields 14-17 of proc(5), counted after the comm field
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _read_result(fd: int, deadline: float) -> tuple[bytes | None, bool]:
    """Read a job's length-prefixed document from its pipe: (document or None, oversized).

    The job is untrusted: it may write garbage, too much, or nothing and die; the caller
    then asks the server how the job ended.
    """
    poller = select.poll()  # not select(): a busy worker can hold fds above FD_SETSIZE
    poller.register(fd, select.POLLIN)
    result = bytearray()
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not poller.poll(remaining * 1000):
            raise TimeoutError("no result before the deadline")
        chunk = os.read(fd, 65536)
        if not chunk:
            return None, False
        result += chunk
        if len(result) > MAX_RESULT_BYTES + 4:
            return None, True  # stop reading: the job's next write fails
        if len(result) >= 4 and len(result) - 4 == int.from_bytes(result[:4], "big"):
            return bytes(result[4:]), False


def _read_line(sock: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n") and len(data) < 65536:
        if not (chunk := sock.recv(65536)):
            break
        data += chunk
    return data.partition(b"\n")[0]


def _exchange(server: _ForkServer, request: bytes, wait: float) -> tuple[dict[str, Any], bytes]:
    """Run one request through the server; return (status, result document)."""
    deadline = time.monotonic() + wait
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(wait)
        sock.connect(server.sock_path)
        sock.sendall(request)  # never shut down our side: EOF tells the server we gave up
        _, fds, _, _ = socket.recv_fds(sock, 1, 1)
        if not fds:
            raise _NoAnswer("fork server closed the connection without an answer")
        try:
            os.set_inheritable(fds[0], False)
            payload, oversized = _read_result(fds[0], deadline)
        finally:
            os.close(fds[0])
        if payload is not None:
            # Complete, typically before the job has even exited: nothing to wait for.
            # Hanging up makes the server kill what is left of the job.
            return {"complete": True}, payload
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        line = _read_line(sock)  # sent once the server has reaped the job
    if not line:
        raise _NoAnswer("fork server closed the connection without an answer")
    try:
        status = json.loads(line)
    except ValueError:
        raise _NoAnswer("fork server sent a malformed status") from None
    if not isinstance(status, dict):
        raise _NoAnswer("fork server sent a malformed status")
    status.update(complete=False, oversized=oversized)
    return status, b""


def run_job(
    kind: str,
    input_path: Path,
    work_dir: Path,
    *,
    limits: Limits = Limits(),  # noqa: B008 - frozen dataclass: a safe shared default
    bounds: Bounds = Bounds(),  # noqa: B008
    member_rules: Path | None = None,
) -> SandboxResult:
    """Decode one attacker-supplied file in a confined child process and report the outcome.

    member_rules: a directory of YARA rules every inflated archive member is scanned
    with (a match is rejected/malware); None scans no member.
    """
    member_rules = Path(member_rules).resolve() if member_rules is not None else None
    if kind not in KINDS:
        raise ValueError(f"unknown sandbox kind {kind!r}")
    input_path, work_dir = Path(input_path).resolve(), Path(work_dir).resolve()
    if not input_path.is_file():
        raise FileNotFoundError(str(input_path))
    work_dir.mkdir(parents=True, exist_ok=True)
    request = (
        json.dumps(
            {
                "kind": kind,
                "input": str(input_path),
                "work_dir": str(work_dir),
                "limits": to_dict(limits),
                "bounds": to_dict(bounds),
            }
        ).encode()
        + b"\n"
    )
    for attempt in (1, 2):  # a server that died since last use is replaced once
        server = _current_server(member_rules, use=True)
        try:
            if server.job_ids is not None:
                os.chown(work_dir, *server.job_ids)  # the job writes here as the sandbox uid
            status, payload = _exchange(server, request, limits.wall_seconds + ANSWER_GRACE)
        except (ConnectionRefusedError, FileNotFoundError, BrokenPipeError):
            _drop_server(server)
            if attempt == 2:
                raise SandboxUnavailable("cannot reach the fork server") from None
            continue
        except (TimeoutError, OSError) as exc:
            _drop_server(server)  # stuck past the job's own deadline: the server is wedged
            raise SandboxUnavailable(f"fork server did not answer: {exc}") from exc
        except _NoAnswer as exc:
            _drop_server(server)
            raise SandboxUnavailable(str(exc)) from None
        finally:
            _release(server)
        if status.get("confined") is False:
            # Exited before it had every layer in place (a layer the server's probe
            # allowed failed in the job): no decoder ran, nothing to say about the file.
            logger.error(
                "sandbox job could not apply its confinement (%s)",
                server.confinement,
                extra={"confinement": server.confinement},
            )
            raise SandboxUnavailable(f"the job could not apply its confinement ({server.confinement})")
        result = classify(status, payload, limits, work_dir)
        if server.job_ids is not None:
            for path in result.files.values():
                # Derivatives move into storage: owned by the job's uid, any later job of
                # that uid could read them there (classify made sure they are regular files).
                os.chown(path, os.geteuid(), os.getegid(), follow_symlinks=False)
        return result
    raise AssertionError("unreachable")


__all__ = [
    "SandboxResult",
    "SandboxUnavailable",
    "confinement",
    "decoder_zlib_dir",
    "decoder_zlib_version",
    "run_job",
    "server_cpu_seconds",
    "shutdown",
]
