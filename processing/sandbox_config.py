"""Build sandbox limits and bounds from settings, and call the one sandbox runner."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from django.conf import settings

from .errors import TransientError
from .metrics import record_sandbox
from .sandbox import Bounds, Limits, SandboxUnavailable, run_job
from .sandbox.kinds import KINDS
from .scanners.chain import _as_bool
from .scanners.yara import DEFAULT_RULES_DIR

# A job that copies its input (a remux) may write this much: the input's size, an eighth
# more and 16 MiB for the new container's indexes. Past it the write fails (RLIMIT_FSIZE):
# an input whose sample tables point many packets at the same bytes cannot make the copy
# outgrow the upload.
COPY_SLACK_DIVISOR = 8
COPY_SLACK_BYTES = 16 << 20


def limits_from_settings():
    return Limits(
        address_space_bytes=settings.AIRLOCK_SANDBOX_LIMITS.memory_bytes,
        cpu_seconds=settings.AIRLOCK_SANDBOX_LIMITS.cpu_seconds,
        wall_seconds=settings.AIRLOCK_SANDBOX_LIMITS.wall_seconds,
    )


def bounds_from_settings():
    return Bounds(
        max_pixels=settings.AIRLOCK_DECODE_LIMITS.pixels,
        max_pdf_pages=settings.AIRLOCK_DECODE_LIMITS.pdf_pages,
        max_text_chars=settings.AIRLOCK_DECODE_LIMITS.text_chars,
        zip_max_entries=settings.AIRLOCK_DECODE_LIMITS.zip_entries,
        zip_max_ratio=settings.AIRLOCK_DECODE_LIMITS.zip_ratio,
        zip_max_total_bytes=settings.AIRLOCK_DECODE_LIMITS.zip_total_bytes,
        zip_max_depth=settings.AIRLOCK_DECODE_LIMITS.zip_depth,
        zip_allow_uninspectable=settings.AIRLOCK_ZIP_ALLOW_UNINSPECTABLE,
        media_max_duration_seconds=settings.AIRLOCK_DECODE_LIMITS.media_duration_seconds,
        media_max_pixels=settings.AIRLOCK_DECODE_LIMITS.media_pixels,
        media_max_streams=settings.AIRLOCK_DECODE_LIMITS.media_streams,
    )


def member_rules_dir() -> Path | None:
    """The YARA rules archive members are scanned with in the sandbox: the scanner's own."""
    if not _as_bool(getattr(settings, "AIRLOCK_YARA_ENABLED", True)):
        return None
    configured = getattr(settings, "AIRLOCK_YARA_RULES_DIR", None)
    return Path(configured) if configured else DEFAULT_RULES_DIR


def limits_for(kind: str, input_path: Path):
    """The job's limits; a job that copies its input may write about the input's size."""
    limits = limits_from_settings()
    job_kind = KINDS.get(kind)
    if job_kind is None or not job_kind.copies_input:
        return limits
    size = input_path.stat().st_size
    return replace(
        limits, max_output_bytes=max(limits.max_output_bytes, size + size // COPY_SLACK_DIVISOR + COPY_SLACK_BYTES)
    )


def run_sandboxed(kind: str, input_path: Path, work_dir: Path, *, bounds=None):
    try:
        result = run_job(
            kind,
            input_path,
            work_dir,
            limits=limits_for(kind, input_path),
            bounds=bounds or bounds_from_settings(),
            member_rules=member_rules_dir(),
        )
    except SandboxUnavailable as exc:
        raise TransientError(f"sandbox unavailable: {exc}") from exc
    record_sandbox(result)
    return result
