"""Shed load at the door: no new uploads while the pipeline is far behind.

The backlog's age is how long the QUEUE_DEPTH-th oldest uploaded file that is
not ready yet (pending or processing, first attempt) has waited. While it is
longer than AIRLOCK_MAX_BACKLOG_SECONDS, new intents and upload-throughs are
refused with 503 UNAVAILABLE + Retry-After, so the files already accepted keep
a bounded time to ready instead of the queue growing without end. Processing
rows count: in-process intake moves a file to `processing` within
milliseconds, so a scan/derive backlog sits there. Files in retry backoff
(attempts > 0) wait on purpose and do not count, and looking at the
QUEUE_DEPTH-th file rather than the first keeps one stuck file (a lost job
waiting for the reconciler) from pausing every upload. Read at most four times
a second per process.
"""

from __future__ import annotations

import threading
import time

from django.conf import settings
from django.utils import timezone

from ..errors import Unavailable
from ..models import Attachment, Lifecycle, Status

_CACHE_SECONDS = 0.25  # a stale "open" lets a burst in: 4 reads a second per process is cheap
QUEUE_DEPTH = 5  # this many files must be late: one stuck file alone pauses nothing
_lock = threading.Lock()
_cached: tuple[float, float] | None = None  # (monotonic time read, backlog age in seconds)


def backlog_seconds() -> float:
    """How long the QUEUE_DEPTH-th oldest unready uploaded file has waited (0 when fewer wait)."""
    global _cached
    now = time.monotonic()
    with _lock:
        if _cached is not None and now - _cached[0] < _CACHE_SECONDS:
            return _cached[1]
    found = list(Attachment.objects.filter(status__in=[Status.PENDING, Status.PROCESSING], uploaded_at__isnull=False,
                                           attempts=0)
                 .exclude(lifecycle__in=[Lifecycle.DISCARDED, Lifecycle.DELETED])
                 .order_by("uploaded_at").values_list("uploaded_at", flat=True)[QUEUE_DEPTH - 1:QUEUE_DEPTH])
    age = max(0.0, (timezone.now() - found[0]).total_seconds()) if found else 0.0
    with _lock:
        _cached = (now, age)
    return age


def refuse_when_behind() -> None:
    limit = settings.AIRLOCK_MAX_BACKLOG_SECONDS
    if limit <= 0:
        return
    age = backlog_seconds()
    if age > limit:
        retry = max(2, min(30, int(age - limit) + 1))
        raise Unavailable("The processing backlog is too long; new uploads are paused. Retry later.",
                          details={"backlog_seconds": round(age, 1), "max_backlog_seconds": limit},
                          headers={"Retry-After": str(retry)})


def forget() -> None:
    """Drop the cached age (tests)."""
    global _cached
    with _lock:
        _cached = None
