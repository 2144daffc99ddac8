"""Misbehaving job kinds for the tests, registered in the sandbox's KINDS by `install()`.

They let tests prove that the worker survives and classifies a crashing, hoarding,
looping, sleeping or babbling job process, and inspect the confinement from inside.
`install()` (tests/conftest.py calls it; a script a test starts calls it itself) adds
them to this process's KINDS, so run_job accepts their names, and makes the fork server
it starts import this module and register them before its first job, as it loads the
real decoders. A kind that needs facts from its test (the escape probe, a size) reads
them as JSON from its input file.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import resource
import signal
import time
from collections.abc import Callable
from typing import Any

from processing.sandbox import runner
from processing.sandbox.child import RESULT_FD, fork_isolated, ok_doc
from processing.sandbox.kinds import KINDS, JobKind


def _facts(src: Any) -> dict[str, Any]:
    """What the test wrote into the job's input, as JSON."""
    return json.loads(src.read())


def _t_segfault(src: Any) -> dict[str, Any]:
    os.kill(os.getpid(), signal.SIGSEGV)
    return {}


def _t_allocate(src: Any) -> dict[str, Any]:
    hog = []
    while True:
        hog.append(b"\x01" * (32 << 20))  # touched memory, not just reserved


def _t_loop(src: Any) -> dict[str, Any]:
    while True:
        pass


def _t_sleep(src: Any) -> dict[str, Any]:
    time.sleep(3600)  # burns no CPU: only the wall-clock deadline can stop it
    return {}


def _t_marked_sleep(src: Any) -> dict[str, Any]:
    os.close(os.open("started", os.O_WRONLY | os.O_CREAT, 0o644))  # in its work dir: the test sees it run
    time.sleep(3600)
    return {}


def _t_garbage(src: Any) -> dict[str, Any]:
    os.write(RESULT_FD, b"\x00\xffnot json{" + os.urandom(512))
    os._exit(0)


def _t_oversized(src: Any) -> dict[str, Any]:
    return {
        "outcome": "ok",
        "reason_code": None,
        "message": "",
        "files": {},
        "data": {"blob": "x" * (4 << 20)},
    }


def _t_exit(src: Any) -> dict[str, Any]:
    os._exit(3)


def _t_env(src: Any) -> dict[str, Any]:
    return ok_doc({"env": sorted(os.environ)}, {})


def _t_limits(src: Any) -> dict[str, Any]:
    names = ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CORE")
    return ok_doc(
        {
            "rlimits": {n: list(resource.getrlimit(getattr(resource, n))) for n in names},
            "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
            "pgid_is_pid": os.getpgid(0) == os.getpid(),
        },
        {},
    )


def _t_bigfile(src: Any) -> dict[str, Any]:
    with open("big.bin", "wb") as fh:
        fh.write(b"\0" * (int(_facts(src)["max_output_bytes"]) + 1))
    return ok_doc({}, {"big": "big.bin"})


def _t_answer_then_hang(src: Any) -> dict[str, Any]:
    # A complete result followed by a process that never exits: the caller must take
    # the result at once, and its hanging up must get the process killed.
    payload = json.dumps(ok_doc({"pid": os.getpid()}, {})).encode()
    os.write(RESULT_FD, len(payload).to_bytes(4, "big") + payload)
    time.sleep(3600)
    return {}


def _t_threads(src: Any) -> dict[str, Any]:
    # A threaded decoder (libheif, libaom) has tids the server's stray sweep can see.
    import threading

    threads = [threading.Thread(target=time.sleep, args=(1.0,)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return ok_doc({"threads": len(threads)}, {})


def _t_isolated_crash(src: Any) -> dict[str, Any]:
    # A render sub-child that segfaults must cost only its own result, not the job.
    try:
        fork_isolated(_t_segfault, None)
    except RuntimeError:
        return ok_doc({"isolated_failed": True}, {})
    return ok_doc({"isolated_failed": False}, {})


TEST_KINDS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "_test_segfault": _t_segfault,
    "_test_allocate": _t_allocate,
    "_test_loop": _t_loop,
    "_test_sleep": _t_sleep,
    "_test_marked_sleep": _t_marked_sleep,
    "_test_garbage": _t_garbage,
    "_test_oversized": _t_oversized,
    "_test_exit": _t_exit,
    "_test_env": _t_env,
    "_test_limits": _t_limits,
    "_test_bigfile": _t_bigfile,
    "_test_isolated_crash": _t_isolated_crash,
    "_test_threads": _t_threads,
    "_test_answer_then_hang": _t_answer_then_hang,
}


# ---------------------------------------------------------------- escapes (confinement tests)
def _attempt(fn: Callable[[], Any]) -> str:
    """'ok' if the escape worked, else the error it met."""
    try:
        fn()
    except OSError as exc:
        return f"denied: {errno.errorcode.get(exc.errno or 0, exc.errno)}"
    except Exception as exc:  # noqa: BLE001 - reported, the caller decides
        return f"denied: {type(exc).__name__}"
    return "ok"


def _read(path: str) -> None:
    with open(path, "rb") as fh:
        fh.read(64)


def _connect(family: int, address: Any) -> None:
    import socket

    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(2)
        sock.connect(address)


def _child_status(body: Callable[[], None]) -> int:
    """Run body in a forked child; its exit code (0 = the escape worked)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the grandchild
        code = 13
        try:
            body()
            code = 0
        except BaseException:  # noqa: BLE001
            code = 13
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def _exec() -> None:
    if _child_status(lambda: os.execv("/bin/true", ["/bin/true"])) != 0:
        raise PermissionError(errno.EPERM, "execve failed")


def _ptrace(pid: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(16, pid, 0, 0) != 0:  # PTRACE_ATTACH
        raise OSError(ctypes.get_errno(), "ptrace")
    libc.ptrace(17, pid, 0, 0)  # PTRACE_DETACH


def _unshare() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
        raise OSError(ctypes.get_errno(), "unshare")


def _fork_many(n: int) -> int:
    pids = []
    try:
        for _ in range(n):
            pid = os.fork()
            if pid == 0:  # pragma: no cover
                time.sleep(30)
                os._exit(0)
            pids.append(pid)
    except OSError:
        pass
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    return len(pids)


def _umount(path: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.umount2(path.encode(), 2) != 0:  # MNT_DETACH
        raise OSError(ctypes.get_errno(), "umount2")


def _capabilities() -> dict[str, str]:
    with open(f"/proc/{os.getpid()}/status") as fh:
        return {k: v.strip() for k, _, v in (line.partition(":") for line in fh) if k.startswith("Cap")}


def _escape_tries(probe: dict[str, Any], ppid: int) -> dict[str, Callable[[], Any]]:
    """Every escape the confinement must stop, by name; probe: what the test set up (paths,
    ports, the worker's pid), ppid: the fork server's pid. Nothing runs until called."""
    return {
        "tcp_connect": lambda: _connect(2, ("127.0.0.1", probe["tcp_port"])),
        "unix_connect": lambda: _connect(1, probe["unix_socket"]),
        "server_environ": lambda: _read(f"/proc/{ppid}/environ"),
        "worker_environ": lambda: _read(f"/proc/{probe['worker_pid']}/environ"),
        "server_mem": lambda: _read(f"/proc/{ppid}/mem"),
        "database": lambda: _read(probe["database"]),
        "storage_root": lambda: os.listdir(probe["storage_root"]),
        "stored_file": lambda: _read(probe["stored_file"]),
        "write_outside": lambda: open(os.path.join(probe["outside_dir"], "planted"), "wb").close(),
        "execve": _exec,
        "ptrace_server": lambda: _ptrace(ppid),
        "unshare_user": _unshare,
        "signal_worker": lambda: os.kill(probe["worker_pid"], 0),
        "setuid_root": lambda: os.setuid(0),
        # The mount-namespace fallback keeps the old root beneath a cover at /.old.
        "old_root": lambda: os.listdir("/.old"),
        "uncover_old_root": lambda: _umount("/.old"),
    }


# The names of the escapes _t_escape tries: the keys of its data that name an escape.
ESCAPES = tuple(_escape_tries({}, 0))


def _t_escape(src: Any) -> dict[str, Any]:
    """Try every escape the confinement must stop; report each one's result."""
    probe = _facts(src)
    tries = _escape_tries(probe, os.getppid())
    # Identity first: a successful unshare_user below would show a new namespace's view.
    results: dict[str, Any] = {"uid": os.getuid(), "capabilities": _capabilities()}
    results.update((name, _attempt(fn)) for name, fn in tries.items())
    results["forks"] = _fork_many(int(probe.get("forks", 1000)))
    return ok_doc(results, {})


def _t_setsid_stray(src: Any) -> dict[str, Any]:
    """Leave a grandchild in its own session, report its pid, then outlive the deadline."""
    read_fd, write_fd = os.pipe()
    if os.fork() == 0:  # pragma: no cover - the child: new session, then orphan its child
        os.setsid()
        if os.fork() == 0:
            os.write(write_fd, str(os.getpid()).encode())
            while True:
                time.sleep(1)
        os._exit(0)
    stray = int(os.read(read_fd, 32))
    with open("stray.pid", "w") as fh:  # in the work dir: the test reads it even after a kill
        fh.write(str(stray))
    payload = json.dumps(ok_doc({"stray": stray}, {})).encode()
    if _facts(src).get("answer"):
        os.write(RESULT_FD, len(payload).to_bytes(4, "big") + payload)
    time.sleep(3600)
    return {}


TEST_KINDS["_test_escape"] = _t_escape
TEST_KINDS["_test_setsid_stray"] = _t_setsid_stray


def _as_kind(kind: Callable[[Any], dict[str, Any]]) -> JobKind:
    """A test kind as a decoder: the data and files it returns are the job's answer (most never return)."""

    def decode(src: Any, work: Any, bounds: Any, tools: Any) -> tuple[dict[str, Any], dict[str, str]]:
        doc = kind(src)
        return doc.get("data", {}), doc.get("files", {})

    return JobKind(decode)


def register() -> None:
    """Add the test kinds to this process's KINDS."""
    KINDS.update({name: _as_kind(kind) for name, kind in TEST_KINDS.items()})


# The fork server imports this module and registers the kinds before it serves (the path
# insertion comes first: the server runs with -I, from its own directory).
_REGISTER = f"import sys; sys.path.insert(0, sys.argv[1]); import {__name__}; {__name__}.register(); "


def install() -> None:
    """Register the test kinds here and in every fork server this process starts from now on."""
    register()
    if _REGISTER not in runner._BOOT:
        runner._BOOT = _REGISTER + runner._BOOT
