"""Shed load at the door: no new uploads while the pipeline is far behind.

When the oldest file waiting for its first pipeline run has waited longer than
AIRLOCK_MAX_BACKLOG_SECONDS, new intents and upload-throughs are refused with
503 UNAVAILABLE + Retry-After, so the files already accepted keep a bounded
time to ready instead of the queue growing without end. Files in retry backoff
(attempts > 0) wait on purpose and do not count. The age is read at most once
per second per process.
"""

from __future__ import annotations

import threading
import time

from django.conf import settings
from django.db.models import Min
from django.utils import timezone

from ..errors import Unavailable
from ..models import Attachment, Lifecycle, Status

_CACHE_SECONDS = 1.0
_lock = threading.Lock()
_cached: tuple[float, float] | None = None  # (monotonic time read, backlog age in seconds)


def backlog_seconds() -> float:
    """How long the oldest uploaded, never-started file has been waiting (0 for none)."""
    global _cached
    now = time.monotonic()
    with _lock:
        if _cached is not None and now - _cached[0] < _CACHE_SECONDS:
            return _cached[1]
    oldest = (Attachment.objects.filter(status=Status.PENDING, uploaded_at__isnull=False, attempts=0)
              .exclude(lifecycle__in=[Lifecycle.DISCARDED, Lifecycle.DELETED])
              .aggregate(oldest=Min("uploaded_at"))["oldest"])
    age = max(0.0, (timezone.now() - oldest).total_seconds()) if oldest is not None else 0.0
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
