"""Idle-time work a spare job process does before it is handed a request.

A job process is a fresh copy-on-write fork: the first write to every page it shares
with the server (object refcounts, interpreter and codec state) and the first touch of
every fresh heap page (decoded pixels, the file's bytes) is a page fault, a few
thousand of them per photo, which an in-process decoder never pays twice. A spare
sitting idle pays them in advance:

- warm(): run the image decoder once on our own tiny samples (built by warmup.py in
  the server), which faults in the pages a real image job writes;
- prefault_heap(): keep freed memory in malloc's heap and fault in HEAP_PREFAULT bytes
  of it, so the first megabytes a job allocates are already mapped.

Both stop as soon as a request is waiting (within one small unit of warm-up), swallow
their own errors (an optimisation must not kill a spare) and run before the kernel
limits are applied, which is fine: they read nothing but our own bytes. The measured
gain is in the README's Performance section.
"""

from __future__ import annotations

import ctypes
import select
from collections.abc import Callable

from attachments.benchswitch import trick_on

from . import images
from .limits import Bounds

# Enough for a 2560x1440 screenshot's pixel buffer (8 MB gained less, 24 and 32 MB cost more).
HEAP_PREFAULT = 16 << 20
_PREFAULT_CHUNK = 4 << 20  # a waiting request is noticed within one chunk
# Allocations below this come from the heap, which madvise()d THP backs and free()
# keeps for reuse (the value glibc's dynamic threshold reaches in a long-lived process).
MMAP_THRESHOLD = 32 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MADV_POPULATE_WRITE = 23  # Linux 5.14+: fault pages in writable without writing them

_libc = ctypes.CDLL(None, use_errno=True)
_libc.malloc.restype = ctypes.c_void_p
_libc.malloc.argtypes = [ctypes.c_size_t]
_libc.free.argtypes = [ctypes.c_void_p]
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]

# Tiny images warmup.preload() fills in the server; JPEG and PNG are most uploads.
SAMPLES: list[bytes] = []
_SAMPLE_BOUNDS = Bounds(thumbnail_size=32)  # small enough that JPEG draft mode and reduce() run


def _request_waiting(fd: int) -> bool:
    return bool(select.select([fd], [], [], 0)[0])


def warm(waiting: Callable[[], bool]) -> None:
    for raw in SAMPLES:
        if waiting():
            return
        images.render(raw, _SAMPLE_BOUNDS)


def prefault_heap(waiting: Callable[[], bool]) -> None:
    _libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    _libc.mallopt(_M_TRIM_THRESHOLD, 2 * MMAP_THRESHOLD)
    block = _libc.malloc(HEAP_PREFAULT)
    if not block:
        return
    try:
        start = (block + 4095) & ~4095
        end = (block + HEAP_PREFAULT) & ~4095
        for chunk in range(start, end, _PREFAULT_CHUNK):
            if waiting():
                return
            size = min(_PREFAULT_CHUNK, end - chunk)
            if _libc.madvise(chunk, size, _MADV_POPULATE_WRITE) != 0:
                ctypes.memset(chunk, 0, size)  # older kernel: touch it ourselves
    finally:
        _libc.free(block)  # back into the heap, kept there by the trim threshold


# Read in the server at start (the jobs' environment is scrubbed before any spare is forked).
STEPS: tuple[Callable[[Callable[[], bool]], None], ...] = (warm, prefault_heap) if trick_on("spare_prewarm") else ()


def prepare(request_fd: int) -> None:
    """Warm up until done or until the server hands us a request (checked between units)."""

    def waiting() -> bool:
        return _request_waiting(request_fd)

    for step in STEPS:
        if waiting():
            return
        try:
            step(waiting)
        except Exception:  # noqa: BLE001 - an optimisation; the job itself reports errors
            return
