"""Shed load at the door, per tenant: no new uploads from a tenant whose own files are far behind.

A tenant's backlog age is how long the QUEUE_DEPTH-th oldest of its uploaded
files that is not ready yet (pending or processing, first attempt) has waited.
While it is longer than AIRLOCK_MAX_BACKLOG_SECONDS, that tenant's new intents
and upload-throughs are refused with 503 UNAVAILABLE + Retry-After, so the
files it already sent keep a bounded time to ready instead of its queue growing
without end. Other tenants are judged on their own files only: one tenant
flooding (its derive jobs parked behind its own AIRLOCK_CONCURRENCY.tenant
cap) does not stop anyone else's uploads. When the whole pipeline is behind,
every tenant with files waiting sees its own files age, so the busy ones are
shed all the same.

Processing rows count: in-process intake moves a file to `processing` within
milliseconds, so a scan/derive backlog sits there. Files in retry backoff
(attempts > 0) wait on purpose and do not count, and looking at the
QUEUE_DEPTH-th file rather than the first keeps one stuck file (a lost job
waiting for the reconciler) from pausing a tenant's uploads. Read at most four
times a second per process and tenant.

Files stranded by an outage are not the tenant's backlog: a file that a stage
handed back because a scanner or storage was down (`dependency_wait_at`) does
not count while it is within three wait periods of that hand-back (it is waiting
for its next try, every DEPENDENCY_WAIT_SECONDS while the outage lasts), and
after that its clock runs from the hand-back, not from its upload. A scanner
down for ten minutes thus pauses nobody's uploads, and once it is back the
drain is judged from the moment the files could run again.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, QuerySet
from django.db.models.functions import Coalesce
from django.db.models.lookups import LessThan
from django.utils import timezone

from ..errors import Unavailable
from ..models import Attachment, Lifecycle, Status
from .processing import DEPENDENCY_WAIT_SECONDS

_CACHE_SECONDS = 0.25  # a stale "open" lets a burst in: 4 reads a second per process and tenant is cheap
QUEUE_DEPTH = 5  # this many files must be late: one stuck file alone pauses nothing
_CACHE_TENANTS = 10_000  # more tenants than this seen within a quarter second: start the cache afresh
_lock = threading.Lock()
_cached: dict[int, tuple[float, float]] = {}  # tenant id -> (monotonic time read, backlog age in seconds)


def backlog_seconds(tenant_id: int) -> float:
    """How long the tenant's QUEUE_DEPTH-th oldest unready uploaded file has waited (0 when fewer wait)."""
    now = time.monotonic()
    with _lock:
        hit = _cached.get(tenant_id)
    if hit is not None and now - hit[0] < _CACHE_SECONDS:
        return hit[1]
    # (tenant, status) is indexed: only this tenant's unready rows are sorted.
    at = timezone.now()
    found = list(
        _waiting(Attachment.objects.filter(tenant_id=tenant_id), now=at)
        .order_by(_clock())
        .values_list(_clock(), flat=True)[QUEUE_DEPTH - 1 : QUEUE_DEPTH]
    )
    age = max(0.0, (at - found[0]).total_seconds()) if found else 0.0
    with _lock:
        if len(_cached) >= _CACHE_TENANTS:
            _cached.clear()
        _cached[tenant_id] = (now, age)
    return age


def refuse_when_behind(tenant_id: int) -> None:
    """503 + Retry-After when this tenant's own backlog is older than AIRLOCK_MAX_BACKLOG_SECONDS."""
    limit = settings.AIRLOCK_MAX_BACKLOG_SECONDS
    if limit <= 0:
        return
    age = backlog_seconds(tenant_id)
    if age > limit:
        retry = max(2, min(30, int(age - limit) + 1))
        raise Unavailable(
            "Your processing backlog is too long; new uploads are paused. Retry later.",
            details={"backlog_seconds": round(age, 1), "max_backlog_seconds": limit},
            headers={"Retry-After": str(retry)},
        )


def paused_tenants(*, limit: int = 20) -> list[dict[str, object]]:
    """Tenants whose new uploads are refused now, by the same rule, oldest backlog first (for /readyz and banners).

    The QUEUE_DEPTH-th oldest file has waited past the limit exactly when at least
    QUEUE_DEPTH files have: one grouped count instead of one read per tenant.
    """
    limit_seconds = settings.AIRLOCK_MAX_BACKLOG_SECONDS
    if limit_seconds <= 0:
        return []
    rows = (
        late_uploads(Attachment.objects.all())
        .values("tenant_id", "tenant__slug")
        .annotate(waiting=Count("pk"))
        .filter(waiting__gte=QUEUE_DEPTH)
        .order_by("-waiting")[:limit]
    )
    return [
        {
            "tenant_id": row["tenant_id"],
            "tenant": row["tenant__slug"],
            "late_files": row["waiting"],
            "max_backlog_seconds": limit_seconds,
        }
        for row in rows
    ]


def late_uploads(queryset: QuerySet[Attachment]) -> QuerySet[Attachment]:
    """The rows of `queryset` that count toward a pause: uploaded, unprocessed, waiting past the limit.

    The banner's "paused" links to exactly these (the console's saved question "late").
    """
    limit_seconds = settings.AIRLOCK_MAX_BACKLOG_SECONDS
    if limit_seconds <= 0:
        return queryset.none()
    now = timezone.now()
    return _waiting(queryset, now=now).filter(LessThan(_clock(), now - timedelta(seconds=limit_seconds)))


def _waiting(queryset: QuerySet[Attachment], *, now: datetime) -> QuerySet[Attachment]:
    """The rows of `queryset` that are the tenant's backlog: uploaded, unprocessed, first attempt, and not waiting
    out a dependency's outage (handed back for one within the last three wait periods; the longest is 1.5)."""
    outage_wait = now - timedelta(seconds=3 * DEPENDENCY_WAIT_SECONDS)
    return (
        queryset.filter(status__in=[Status.PENDING, Status.PROCESSING], uploaded_at__isnull=False, attempts=0)
        .exclude(lifecycle__in=[Lifecycle.DISCARDED, Lifecycle.DELETED])
        .exclude(dependency_wait_at__gte=outage_wait)
    )


def _clock() -> Coalesce:
    """Where a backlog row's wait starts: its last hand-back for a dependency, else its upload."""
    return Coalesce("dependency_wait_at", "uploaded_at")


def forget() -> None:
    """Drop the cached ages (tests)."""
    with _lock:
        _cached.clear()
