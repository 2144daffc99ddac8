"""What runs inside one job process (a grandchild forked by the fork server).

The server keeps one *spare* forked ahead of time, so fork and the request-independent
part of the confinement (own process group, parent-death signal, every inherited fd
closed, stdio to /dev/null, environment scrubbed) and the page-fault warm-up of
prewarm.py are off the critical path. When a request arrives on fd 0, `spare_main`
applies the kernel limits from it BEFORE the input path is even opened, runs one
decoder, writes one length-prefixed JSON document to fd 3 (a pipe the worker reads)
and _exits. Every exception is turned into a content outcome here; anything that
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
from pathlib import Path
from typing import Any

from . import archives, images, pdfs, prewarm
from .limits import Bounds, Limits, apply_limits, from_dict, remaining_cpu_seconds
from .outcome import Rejected, short_repr

REQUEST_FD = 0
RESULT_FD = 3
KEEP_ENV = ("PATH", "LANG")
_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)  # loaded once in the server, inherited by forks


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
    high_req = fcntl.fcntl(request_fd, fcntl.F_DUPFD, 10)  # out of the way of 0..3
    high_res = fcntl.fcntl(result_fd, fcntl.F_DUPFD, 10)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(high_req, REQUEST_FD)
    os.dup2(devnull, 1)  # C libraries may print; nothing reaches the worker's logs
    os.dup2(devnull, 2)
    os.dup2(high_res, RESULT_FD)
    os.closerange(RESULT_FD + 1, _max_fd())  # server sockets, other jobs' pipes, devnull
    confine_environment()  # already done by the server: a cheap re-check
    prewarm.prepare(REQUEST_FD)  # our own samples only; stops once a request is waiting


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


def _read_request() -> dict[str, Any]:
    chunks, size = [], 0
    while chunk := os.read(REQUEST_FD, 65536):
        chunks.append(chunk)
        size += len(chunk)
        if size > 1 << 20:
            raise ValueError("request too large")
    os.close(REQUEST_FD)
    req: dict[str, Any] = json.loads(b"".join(chunks))  # written by our own server
    return req


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


def dispatch(req: dict[str, Any]) -> dict[str, Any]:
    """Run one decoder and map every exception to a content outcome."""
    from PIL.Image import DecompressionBombError

    kind, bounds = req["kind"], from_dict(Bounds, req["bounds"])
    src, work = Path(req["input"]), Path(req["work_dir"])
    try:
        if kind == "image":
            return ok_doc(*images.process(src, work, bounds))
        if kind == "pdf":
            return ok_doc(*pdfs.process(src, work, bounds, isolate=fork_isolated))
        if kind == "zip":
            return ok_doc(*archives.process(src, work, bounds))
        if req.get("allow_test") and kind.startswith("_test_"):
            from .testkinds import TEST_KINDS  # never imported unless a test asks

            if kind in TEST_KINDS:
                return TEST_KINDS[kind](req)
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


def spare_main(request_fd: int, result_fd: int) -> None:
    """Entry point of a forked spare: prepare, wait for one request, serve it; never returns."""
    code = 70
    try:
        _prepare(request_fd, result_fd)
        req = _read_request()  # blocks until the server hands this spare a job
        apply_limits(from_dict(Limits, req["limits"]))  # before the input is touched
        os.chdir(req["work_dir"])
        doc = dispatch(req)
        doc["rss_kb"] = _peak_rss_kb()  # the server answers before it can wait4() us
        payload = json.dumps(doc, separators=(",", ":")).encode()
        frame = memoryview(len(payload).to_bytes(4, "big") + payload)
        while frame:
            frame = frame[os.write(RESULT_FD, frame) :]
        code = 0
        # Woken by our result, the server and then the worker were often queued behind
        # this process tearing down its address space (~1 ms for a photo) on its core;
        # at nice 19 they preempt it and the teardown waits for an idle moment.
        os.nice(19)
    finally:
        os._exit(code)  # no atexit/finalizers: they belong to the server
