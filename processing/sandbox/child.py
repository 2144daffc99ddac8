"""What runs inside one job process (a grandchild forked by the fork server).

The server keeps one *spare* forked ahead of time, so fork and the request-independent
part of the confinement (own process group, parent-death signal, every inherited fd
closed, stdio to /dev/null, environment scrubbed, and the layers of confine.py: uid,
no-new-privs, RLIMIT_NPROC, seccomp) are off the critical path. When a request arrives on fd 0 (a socket: the
server passes the
input file and the work dir as fds with it), `spare_main` enters the work dir, confines
itself to it with Landlock, applies the kernel limits, runs one decoder on the input
fd, writes one length-prefixed JSON document to fd 3 (a pipe the worker reads) and
_exits. With the mountns fallback (no Landlock) the spare builds its private root ahead
instead, and the other layers follow the switch into it once the work dir is known.
Every exception is turned into a content outcome here; anything that
escapes (a segfault, a kill) is classified by the runner from the exit status.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import logging
import os
import resource
import signal
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import confine
from .kinds import KINDS
from .limits import Bounds, Limits, apply_limits, from_dict, remaining_cpu_seconds
from .outcome import Rejected, short_repr

REQUEST_FD = 0
RESULT_FD = 3
CONFINED = b"C"  # sent on REQUEST_FD once the job is confined (_report_confined)
READ_ROOT_FDS = 4  # the O_PATH fds of confine.read_roots(), moved here (Landlock rules)
KEEP_ENV = ("PATH", "LANG")
_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)  # loaded once in the server, inherited by forks


@dataclass
class Confinement:
    """What the fork server decided once (confine.in_force) and every job applies."""

    layers: tuple[str, ...] = ()
    uid: int = 0
    gid: int = 0
    cap_last: int = 40
    nproc: int = 128
    landlock_abi: int = 0
    read_fds: list[int] = field(default_factory=list)  # in the server; READ_ROOT_FDS.. in a job
    seccomp: Any = None  # the pyseccomp filter, built once
    ruleset: int = -1  # a job's Landlock ruleset fd, built before its request arrives
    new_root: str = ""  # mountns: the empty directory a job's private root is mounted on
    mount_roots: list[Any] = field(default_factory=list)  # mountns: what that root shows, read-only


CONFINEMENT = Confinement()  # set by server.serve() before the first fork
MEMBER_RULES: Any = None  # yara_x.Rules compiled by the server (archive members), or None
MEMBER_SCAN_TIMEOUT = 10  # seconds per member; the job's CPU limit bounds the total


def member_scanner() -> Callable[[bytes], str | None] | None:
    """A function that scans one inflated archive member with the server's rules."""
    if MEMBER_RULES is None:
        return None
    import yara_x

    scanner = yara_x.Scanner(MEMBER_RULES)
    scanner.set_timeout(MEMBER_SCAN_TIMEOUT)

    def scan(data: bytes) -> str | None:
        matches = scanner.scan(data).matching_rules
        return f"yara: {matches[0].identifier}" if matches else None

    return scan


def _die_with_parent() -> None:
    # The server is single-threaded, so PDEATHSIG (which tracks the parent *thread*) is
    # reliable here; if the server died before we got here, go now.
    parent = os.getppid()
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(70)


def _max_fd() -> int:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return 1 << 20 if hard == resource.RLIM_INFINITY else min(hard, 1 << 20)


def _prepare(request_fd: int, result_fd: int) -> None:
    """Everything that does not depend on the request (runs before it arrives)."""
    os.setpgid(0, 0)  # the server kills the whole group at the deadline (render sub-child too)
    _die_with_parent()
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # oversized output -> OSError -> corrupt
    conf = CONFINEMENT
    base = READ_ROOT_FDS + len(conf.read_fds) + 10
    high_req = fcntl.fcntl(request_fd, fcntl.F_DUPFD, base)  # out of the way of 0..3 and the roots
    high_res = fcntl.fcntl(result_fd, fcntl.F_DUPFD, base)
    high_roots = [fcntl.fcntl(fd, fcntl.F_DUPFD, base) for fd in conf.read_fds]
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(high_req, REQUEST_FD)
    os.dup2(devnull, 1)  # C libraries may print; nothing reaches the worker's logs
    os.dup2(devnull, 2)
    os.dup2(high_res, RESULT_FD)
    for n, fd in enumerate(high_roots):
        os.dup2(fd, READ_ROOT_FDS + n, inheritable=False)
    conf.read_fds = list(range(READ_ROOT_FDS, READ_ROOT_FDS + len(high_roots)))
    os.closerange(READ_ROOT_FDS + len(high_roots), _max_fd())  # server sockets, other jobs' pipes
    confine_environment()  # already done by the server: a cheap re-check
    if "mountns" in conf.layers:
        # Mounting needs the privileges the other layers take away: they follow the
        # switch to the private root, once the request names the work dir.
        confine.private_root(conf.new_root, conf.mount_roots)
    else:
        _confine_process(conf)


def _confine_process(conf: Confinement) -> None:
    """The request-independent layers (confine.py), in the only order that works."""
    if "uid" in conf.layers:
        confine.drop_identity(conf.uid, conf.gid, conf.cap_last)
        _die_with_parent()  # a change of credentials clears the parent-death signal
    elif "mountns" in conf.layers:
        confine.drop_capabilities(conf.cap_last)  # those of root, or of a user namespace's creator
    if {"nnp", "seccomp", "landlock"} & set(conf.layers):
        confine.no_new_privs()  # seccomp and Landlock need it without CAP_SYS_ADMIN
    if "nproc" in conf.layers:
        confine.limit_processes(conf.nproc)
    if "landlock" in conf.layers:
        # Built now, restricted once the work dir is known (only that is on the critical
        # path). Its own /proc/<pid> stays readable (libraries read /proc/self/*).
        own = os.open(f"/proc/{os.getpid()}", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            conf.ruleset = confine.landlock_ruleset([*conf.read_fds, own], conf.landlock_abi)
        finally:
            os.close(own)
        for fd in conf.read_fds:
            os.close(fd)
        conf.read_fds = []
    if "seccomp" in conf.layers:
        conf.seccomp.load()


def _enter_work_dir(conf: Confinement, work_fd: int, work_path: str) -> None:
    if "mountns" in conf.layers:
        confine.enter_private_root(work_path, work_fd)  # cwd: /work
        _confine_process(conf)
    else:
        os.fchdir(work_fd)  # decoders write relative names: no path above it is needed
    if "landlock" in conf.layers:
        confine.landlock_restrict(conf.ruleset, work_fd, conf.landlock_abi)
    for fd in [*conf.read_fds, work_fd]:
        os.close(fd)


def confine_environment() -> None:
    """Process-wide settings every job needs; the server applies them once before forking."""
    for key in list(os.environ):
        if key not in KEEP_ENV:
            del os.environ[key]  # no credentials in the decoder's reach
    os.umask(0o077)
    logging.disable(logging.CRITICAL)  # pypdf warnings would only go to /dev/null anyway
    warnings.simplefilter("ignore")
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = None  # images.py checks our (stricter) bound before any decode


def _read_request() -> tuple[dict[str, Any], list[int]]:
    """The request and the fds sent with it: [input file, work dir].

    The socket stays open (REQUEST_FD): _report_confined() answers on it.
    """
    import socket

    sock = socket.socket(fileno=REQUEST_FD)
    chunk, fds, _, _ = socket.recv_fds(sock, 65536, 2)
    chunks, size = [chunk], len(chunk)
    while chunk := sock.recv(65536):
        chunks.append(chunk)
        size += len(chunk)
        if size > 1 << 20:
            raise ValueError("request too large")
    sock.detach()
    if len(fds) != 2:
        raise ValueError("the request came without its input and work dir")
    req: dict[str, Any] = json.loads(b"".join(chunks))  # written by our own server
    return req, fds


def fork_isolated(fn: Callable[..., Any], *args: Any) -> Any:
    """Run fn in a forked sub-child (same limits, own CPU budget); raise if it fails."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the sub-child
        code = 1
        try:
            os.close(read_fd)
            os.close(RESULT_FD)  # only the job process may answer the server
            _die_with_parent()
            cpu = remaining_cpu_seconds()  # a fresh process starts at 0 CPU seconds
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
            os.write(write_fd, json.dumps(fn(*args)).encode()[:4096])
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    chunks = []
    while chunk := os.read(read_fd, 4096):
        chunks.append(chunk)
    os.close(read_fd)
    _, status = os.waitpid(pid, 0)
    if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
        raise RuntimeError(f"isolated call failed (status {status})")
    return json.loads(b"".join(chunks)[:4096])


# ---------------------------------------------------------------- dispatch
def ok_doc(data: dict[str, Any], files: dict[str, str]) -> dict[str, Any]:
    return {"outcome": "ok", "reason_code": None, "message": "", "data": data, "files": files}


def _rejected(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {
        "outcome": "rejected",
        "reason_code": code,
        "message": message[:300],
        "data": {},
        "files": {},
        **extra,
    }


class _Tools:
    """What a job kind's decoder may use inside the job, besides its input and work dir."""

    isolate = staticmethod(fork_isolated)
    member_scanner = staticmethod(member_scanner)


def dispatch(req: dict[str, Any], src: Any = None) -> dict[str, Any]:
    """Run the decoder of the request's kind (kinds.py); map every exception to a content outcome.

    `src` is the open input file (a confined job has no path to it); the job runs
    inside its work dir, so derivatives are written under relative names.
    """
    from PIL.Image import DecompressionBombError

    kind, bounds = req["kind"], from_dict(Bounds, req["bounds"])
    src, work = (src if src is not None else Path(req["input"])), Path(".")
    try:
        job_kind = KINDS.get(kind)
        if job_kind is not None:
            return ok_doc(*job_kind.decode(src, work, bounds, _Tools))
        return _rejected("corrupt", f"unknown kind {short_repr(kind)}")
    except Rejected as exc:
        return _rejected(exc.reason_code, exc.message)
    except DecompressionBombError as exc:
        return _rejected("pixel_limit", short_repr(str(exc), 200))
    except MemoryError:
        return _rejected("corrupt", "decoder ran out of memory", memory=True)
    except BaseException as exc:  # noqa: BLE001 - any decoder failure is a content outcome
        return _rejected("corrupt", f"{type(exc).__name__}: {short_repr(str(exc), 200)}")


def _peak_rss_kb() -> int:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return max(own, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)


def _report_confined() -> None:
    """Tell the server every layer is in place, before any input byte is read.

    A job that exits without saying so failed to confine itself (infrastructure, the
    runner retries it), not on its input: no decoder had run yet, so none can fake it.
    """
    os.write(REQUEST_FD, CONFINED)
    os.close(REQUEST_FD)


def spare_main(request_fd: int, result_fd: int) -> None:
    """Entry point of a forked spare: prepare, wait for one request, serve it; never returns."""
    code = 70
    try:
        _prepare(request_fd, result_fd)
        req, (input_fd, work_fd) = _read_request()  # blocks until the server hands us a job
        _enter_work_dir(CONFINEMENT, work_fd, req["work_dir"])
        apply_limits(from_dict(Limits, req["limits"]))  # before the input is touched
        _report_confined()
        with os.fdopen(input_fd, "rb") as src:
            doc = dispatch(req, src)
        doc["rss_kb"] = _peak_rss_kb()  # the server answers before it can wait4() us
        payload = json.dumps(doc, separators=(",", ":")).encode()
        frame = memoryview(len(payload).to_bytes(4, "big") + payload)
        while frame:
            frame = frame[os.write(RESULT_FD, frame) :]
        code = 0
        # At nice 19 the server and the worker, woken by our result, preempt the
        # teardown of this address space instead of queueing behind it.
        os.nice(19)
    finally:
        os._exit(code)  # no atexit/finalizers: they belong to the server
