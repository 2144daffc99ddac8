"""Misbehaving job kinds, reachable only with run_job(..., allow_test_kinds=True).

They let tests prove that the worker survives and classifies a crashing, hoarding,
looping, sleeping or babbling job process, and inspect the confinement from inside.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import time
from collections.abc import Callable
from typing import Any

from .child import RESULT_FD, fork_isolated, ok_doc


def _t_segfault(req: dict[str, Any]) -> dict[str, Any]:
    os.kill(os.getpid(), signal.SIGSEGV)
    return {}


def _t_allocate(req: dict[str, Any]) -> dict[str, Any]:
    hog = []
    while True:
        hog.append(b"\x01" * (32 << 20))  # touched memory, not just reserved


def _t_loop(req: dict[str, Any]) -> dict[str, Any]:
    while True:
        pass


def _t_sleep(req: dict[str, Any]) -> dict[str, Any]:
    time.sleep(3600)  # burns no CPU: only the wall-clock deadline can stop it
    return {}


def _t_garbage(req: dict[str, Any]) -> dict[str, Any]:
    os.write(RESULT_FD, b"\x00\xffnot json{" + os.urandom(512))
    os._exit(0)


def _t_oversized(req: dict[str, Any]) -> dict[str, Any]:
    return {
        "outcome": "ok",
        "reason_code": None,
        "message": "",
        "files": {},
        "data": {"blob": "x" * (4 << 20)},
    }


def _t_exit(req: dict[str, Any]) -> dict[str, Any]:
    os._exit(3)


def _t_env(req: dict[str, Any]) -> dict[str, Any]:
    return ok_doc({"env": sorted(os.environ)}, {})


def _t_limits(req: dict[str, Any]) -> dict[str, Any]:
    names = ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CORE")
    return ok_doc(
        {
            "rlimits": {n: list(resource.getrlimit(getattr(resource, n))) for n in names},
            "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
            "pgid_is_pid": os.getpgid(0) == os.getpid(),
        },
        {},
    )


def _t_bigfile(req: dict[str, Any]) -> dict[str, Any]:
    with open("big.bin", "wb") as fh:
        fh.write(b"\0" * (int(req["limits"]["max_output_bytes"]) + 1))
    return ok_doc({}, {"big": "big.bin"})


def _t_answer_then_hang(req: dict[str, Any]) -> dict[str, Any]:
    # A complete result followed by a process that never exits: the caller must take
    # the result at once, and its hanging up must get the process killed.
    payload = json.dumps(ok_doc({"pid": os.getpid()}, {})).encode()
    os.write(RESULT_FD, len(payload).to_bytes(4, "big") + payload)
    time.sleep(3600)
    return {}


def _t_isolated_crash(req: dict[str, Any]) -> dict[str, Any]:
    # A render sub-child that segfaults must cost only its own result, not the job.
    try:
        fork_isolated(_t_segfault, req)
    except RuntimeError:
        return ok_doc({"isolated_failed": True}, {})
    return ok_doc({"isolated_failed": False}, {})


TEST_KINDS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "_test_segfault": _t_segfault,
    "_test_allocate": _t_allocate,
    "_test_loop": _t_loop,
    "_test_sleep": _t_sleep,
    "_test_garbage": _t_garbage,
    "_test_oversized": _t_oversized,
    "_test_exit": _t_exit,
    "_test_env": _t_env,
    "_test_limits": _t_limits,
    "_test_bigfile": _t_bigfile,
    "_test_isolated_crash": _t_isolated_crash,
    "_test_answer_then_hang": _t_answer_then_hang,
}
