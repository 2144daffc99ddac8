"""Limits (what the kernel enforces on a child) and Bounds (what the decoders check).

Both are plain frozen dataclasses so the caller (Django settings, tests) builds them
and the sandbox never reads configuration itself. They cross the process boundary as
JSON dicts, hence the small to/from helpers.
"""

from __future__ import annotations

import resource
from dataclasses import asdict, dataclass, fields
from typing import Any, TypeVar

T = TypeVar("T", "Limits", "Bounds")

# A job's answer is a few hundred bytes of JSON; anything near this is garbage.
MAX_RESULT_BYTES = 256 << 10


@dataclass(frozen=True)
class Limits:
    address_space_bytes: int = 1 << 30  # RLIMIT_AS
    cpu_seconds: int = 30  # RLIMIT_CPU
    wall_seconds: float = 60.0  # killed past it
    max_output_bytes: int = 64 << 20  # RLIMIT_FSIZE
    max_open_files: int = 64  # RLIMIT_NOFILE


@dataclass(frozen=True)
class Bounds:
    max_pixels: int = 50_000_000
    max_pdf_pages: int = 2000
    max_text_chars: int = 1_000_000
    zip_max_entries: int = 1000
    zip_max_ratio: float = 100.0
    zip_max_total_bytes: int = 1 << 30
    zip_max_depth: int = 3
    # Entries nothing here can inflate (implode, PPMd, encrypted, other methods) pass
    # unscanned instead of rejected/archive_uninspectable: their declared sizes still count.
    zip_allow_uninspectable: bool = False
    max_gif_frames: int = 10_000  # frame-flood bound for counting frames (we only decode frame 0)
    thumbnail_size: int = 256
    display_size: int = 2048  # long edge of the display rendition (HEIC/HEIF/AVIF)
    media_max_duration_seconds: int = 3600
    media_max_pixels: int = 7680 * 4320  # one frame: admits 4K and 8K UHD, refuses anything larger
    media_max_streams: int = 16
    poster_size: int = 1280  # long edge of a video's poster frame
    # A named variant job (kind "variant"): the long edge it fits within and its format.
    variant_size: int = 0
    variant_format: str = "webp"  # "webp" or "jpeg"
    variant_page: int = 0  # a PDF page (1-based) for the console's page previews; 0 for an image variant
    # A web rendition job (kind "transcode", sandbox/transcode.py): what it encodes to.
    transcode_long_edge: int = 1920
    transcode_preset: str = "veryfast"
    transcode_crf: int = 23
    transcode_max_bit_rate: int = 8_000_000
    transcode_threads: int = 2


def to_dict(obj: Limits | Bounds) -> dict[str, Any]:
    return asdict(obj)


def from_dict(cls: type[T], raw: dict[str, Any]) -> T:
    # Unknown keys are ignored so an older server and a newer client can still talk.
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in raw.items() if k in names})


def _set(which: int, soft: int, hard: int) -> None:
    # Never try to raise a hard limit (EPERM for non-root); clamp to what we may have.
    _, cur_hard = resource.getrlimit(which)
    if cur_hard != resource.RLIM_INFINITY:
        hard = min(hard, cur_hard)
        soft = min(soft, hard)
    resource.setrlimit(which, (soft, hard))


def apply_limits(limits: Limits) -> None:
    """Set the kernel limits on the current process; called before any input is opened."""
    _set(resource.RLIMIT_CORE, 0, 0)  # a crashing decoder must not dump attacker memory to disk
    _set(resource.RLIMIT_AS, limits.address_space_bytes, limits.address_space_bytes)
    # soft -> SIGXCPU (classified as cpu/timeout), hard one second later -> SIGKILL as a backstop
    cpu = max(1, int(limits.cpu_seconds))
    _set(resource.RLIMIT_CPU, cpu, cpu + 1)
    _set(resource.RLIMIT_FSIZE, limits.max_output_bytes, limits.max_output_bytes)
    _set(resource.RLIMIT_NOFILE, limits.max_open_files, limits.max_open_files)


def remaining_cpu_seconds() -> int:
    """CPU seconds left under our soft RLIMIT_CPU (a forked sub-child starts again at 0)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_CPU)
    if soft == resource.RLIM_INFINITY:
        return 3600
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return max(1, int(soft - (ru.ru_utime + ru.ru_stime)))
