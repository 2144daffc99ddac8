"""Turn (exit status, raw result bytes) from one job into a SandboxResult.

Runs in the worker, so it trusts nothing the job wrote: the JSON must have the exact
shape, reason codes must be known, and every derivative must be a plain file directly
inside work_dir. Anything else is the child misbehaving, i.e. rejected/corrupt.
"""

from __future__ import annotations

import json
import os
import signal
import stat
from pathlib import Path
from typing import Any

from .limits import Limits
from .outcome import REASON_CODES, SandboxResult


def _clean(message: Any, limit: int = 300) -> str:
    text = message if isinstance(message, str) else ""
    return "".join(ch if ch.isprintable() else "?" for ch in text[:limit])


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _files(raw: Any, work_dir: Path) -> dict[str, Path]:
    if not isinstance(raw, dict):
        raise TypeError("files is not a mapping")
    out: dict[str, Path] = {}
    for name, filename in raw.items():
        if not (isinstance(name, str) and isinstance(filename, str)):
            raise TypeError("bad file entry")
        if not filename or "/" in filename or filename in (".", ".."):
            raise ValueError("derivative outside work_dir")
        path = work_dir / filename
        if not stat.S_ISREG(os.lstat(path).st_mode):  # no symlinks, fifos, devices
            raise ValueError("derivative is not a regular file")
        out[name] = path
    return out


def _from_payload(payload: bytes, work_dir: Path, rss: int | None) -> SandboxResult:
    doc = json.loads(payload)
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), dict):
        raise TypeError("not a result document")
    if rss is None and isinstance(doc.get("rss_kb"), int) and doc["rss_kb"] >= 0:
        rss = doc["rss_kb"]  # self-reported (answered before exit): a metric, nothing more
    outcome, code = doc.get("outcome"), doc.get("reason_code")
    if outcome == "ok" and code is None:
        files = _files(doc.get("files", {}), work_dir)
    elif outcome == "rejected" and code in REASON_CODES:
        files = {}
    else:
        raise ValueError("bad outcome")
    killed_by = "memory" if doc.get("memory") is True else None
    return SandboxResult(outcome, code, _clean(doc.get("message", "")), doc["data"], files, rss, killed_by)


def classify(status: dict[str, Any], payload: bytes, limits: Limits, work_dir: Path) -> SandboxResult:
    """Classify one finished job; every branch is a content outcome.

    A resource limit (timeout, cpu, memory, signal) is marked in killed_by: the caller
    takes it for a verdict only when a solo re-run trips it again (solo.py).
    """
    rss = status.get("maxrss_kb")
    rss = int(rss) if isinstance(rss, int) else None
    sig, cpu = status.get("signal"), float(status.get("cpu_seconds") or 0.0)

    def rejected(code: str, message: str, killed_by: str | None) -> SandboxResult:
        return SandboxResult("rejected", code, message, {}, {}, rss, killed_by)

    if status.get("timed_out"):
        return rejected("timeout", f"decoder exceeded {limits.wall_seconds:g}s of wall-clock time", "timeout")
    if status.get("complete") and status.get("exit_code") is None and sig is None:
        try:  # answered as soon as the result was complete, before the job exited
            return _from_payload(payload, work_dir, rss)
        except (ValueError, TypeError, OSError):
            return rejected("corrupt", "decoder produced malformed output", None)
    if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= limits.cpu_seconds):
        return rejected("timeout", f"decoder exceeded {limits.cpu_seconds}s of CPU time", "cpu")
    if sig is not None:
        return rejected("corrupt", f"decoder crashed ({_signal_name(int(sig))})", "signal")
    if status.get("oversized"):
        return rejected("corrupt", "decoder produced oversized output", None)
    if status.get("exit_code") != 0:
        return rejected("corrupt", f"decoder exited with status {status.get('exit_code')}", None)
    if not status.get("complete"):
        return rejected("corrupt", "decoder produced malformed output", None)
    try:
        return _from_payload(payload, work_dir, rss)
    except (ValueError, TypeError, OSError):
        return rejected("corrupt", "decoder produced malformed output", None)
