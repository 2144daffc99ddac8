"""Small pieces shared by the decoders: the content-rejection exception and a safe writer."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

REASON_CODES = frozenset(
    {
        "pixel_limit",
        "page_limit",
        "archive_limit",
        "archive_uninspectable",
        "corrupt",
        "timeout",
        "malware",
        "duration_limit",
        "codec_not_allowed",
        "stream_limit",
    }
)


# What a job can run into because of the host as much as because of its bytes: a busy host
# stretches wall time, memory pressure gets a job killed, a C library that cannot map
# memory under RLIMIT_AS aborts. Only a repeat on a quiet re-run makes one a verdict (solo.py).
RESOURCE_LIMITS = frozenset({"timeout", "cpu", "memory", "signal"})


class Rejected(Exception):
    """A content decision made by a decoder (never retried)."""

    def __init__(self, reason_code: str, message: str) -> None:
        assert reason_code in REASON_CODES, reason_code
        super().__init__(message)
        self.reason_code = reason_code
        self.message = message


def short_repr(value: object, limit: int = 80) -> str:
    """Attacker-controlled strings only ever leave the child as a short repr."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# A decoder's input: a path (in-process use, warm-up) or the file the fork server opened
# for the job (a confined job has no path to it).
Source = Path | str | BinaryIO


def read_source(src: Source) -> bytes:
    if isinstance(src, (str, Path)):
        return Path(src).read_bytes()
    src.seek(0)
    return src.read()


def write_file(work_dir: Path, name: str, data: bytes) -> str:
    """Write a derivative into work_dir without following a planted symlink; return its name."""
    path = os.path.join(work_dir, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return name


@dataclass
class SandboxResult:
    outcome: str  # "ok" | "rejected"
    reason_code: str | None  # for rejected: one of REASON_CODES
    message: str  # short, human-readable; attacker strings only as a short repr
    data: dict[str, Any] = field(default_factory=dict)  # small JSON-able facts
    files: dict[str, Path] = field(default_factory=dict)  # derivatives inside work_dir
    peak_rss_kb: int | None = None  # the job process's ru_maxrss
    killed_by: str | None = None  # None | "timeout" | "signal" | "memory" | "cpu"

    @property
    def hit_resource_limit(self) -> bool:
        return self.outcome == "rejected" and self.killed_by in RESOURCE_LIMITS
