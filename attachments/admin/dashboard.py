"""Reads behind the moderation dashboard: what the pipeline looks like now and lately.

Every function is a selector (no writes) taking `now` so tests can pin time.
Counts come from the database, the system of record, never from the broker.
`tenant_id` narrows every number to one tenant (a tenant-scoped moderator's
view); None is the whole platform.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Count, F, Min, Q
from django.db.models.functions import TruncDay, TruncHour
from django.utils import timezone

from ..models import Attachment, DeadLetter, Lifecycle, Status, TransitionLog
from ..notices import Notice, service_notices
from ..reasons import ReasonCode

STATUS_ORDER: tuple[str, ...] = tuple(s.value for s in Status)


def _attachments(tenant_id: int | None):
    qs = Attachment.objects.all()
    return qs if tenant_id is None else qs.filter(tenant_id=tenant_id)


def _by_attachment_tenant(qs, tenant_id: int | None):
    return qs if tenant_id is None else qs.filter(attachment__tenant_id=tenant_id)


def status_distribution(*, tenant_id: int | None = None) -> dict[str, int]:
    """How many live (not deleted) attachments are in each status right now."""
    counts = dict.fromkeys(STATUS_ORDER, 0)
    rows = (
        _attachments(tenant_id).exclude(lifecycle=Lifecycle.DELETED).values("status").annotate(n=Count("id")).order_by()
    )
    for row in rows:
        counts[row["status"]] = row["n"]
    return counts


@dataclass
class Bucket:
    start: datetime
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATUS_ORDER, 0))

    @property
    def total(self) -> int:
        return sum(self.counts.values())


PERIODS = {
    # name: (bucket size, number of buckets, truncation)
    "24h": (timedelta(hours=1), 24, TruncHour),
    "14d": (timedelta(days=1), 14, TruncDay),
}


def _floor(moment: datetime, size: timedelta) -> datetime:
    moment = moment.astimezone(timezone.get_current_timezone())
    if size >= timedelta(days=1):
        return moment.replace(hour=0, minute=0, second=0, microsecond=0)
    return moment.replace(minute=0, second=0, microsecond=0)


def status_timeline(*, now: datetime | None = None, period: str = "24h", tenant_id: int | None = None) -> list[Bucket]:
    """Transitions into each status per hour (24h) or per day (14d), oldest bucket first."""
    now = now or timezone.now()
    size, count, trunc = PERIODS[period]
    last = _floor(now, size)
    first = last - size * (count - 1)
    buckets = {first + size * i: Bucket(start=first + size * i) for i in range(count)}
    rows = (
        _by_attachment_tenant(TransitionLog.objects.all(), tenant_id)
        .filter(created_at__gte=first, created_at__lte=now)
        .exclude(from_status=F("to_status"))  # a clean rescan stays ready: no transition into it
        .annotate(bucket=trunc("created_at"))
        .values("bucket", "to_status")
        .annotate(n=Count("id"))
        .order_by()
    )
    for row in rows:
        bucket = buckets.get(_floor(row["bucket"], size))
        if bucket is not None and row["to_status"] in bucket.counts:
            bucket.counts[row["to_status"]] += row["n"]
    return list(buckets.values())


def percentile(sorted_values: list[float], p: float) -> float | None:
    """Linear-interpolated percentile (p in 0..100) of an already sorted list."""
    if not sorted_values:
        return None
    rank = (len(sorted_values) - 1) * p / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    if low == high:
        return sorted_values[low]
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (rank - low)


@dataclass
class Latency:
    window: str
    count: int
    p50: float | None
    p95: float | None
    p99: float | None


TIME_TO_READY_WINDOWS = {"last hour": timedelta(hours=1), "last day": timedelta(days=1)}
_LATENCY_SAMPLE_CAP = 100_000


def time_to_ready(*, now: datetime | None = None, tenant_id: int | None = None) -> list[Latency]:
    """Seconds from the bytes landing (uploaded_at) to ready (ready_at): p50/p95/p99 per window."""
    now = now or timezone.now()
    result = []
    for label, window in TIME_TO_READY_WINDOWS.items():
        pairs = (
            _attachments(tenant_id)
            .filter(ready_at__gt=now - window, ready_at__lte=now, uploaded_at__isnull=False)
            .order_by("-ready_at")
            .values_list("uploaded_at", "ready_at")[:_LATENCY_SAMPLE_CAP]
        )
        seconds = sorted(max(0.0, (ready - uploaded).total_seconds()) for uploaded, ready in pairs)
        result.append(
            Latency(
                window=label,
                count=len(seconds),
                p50=percentile(seconds, 50),
                p95=percentile(seconds, 95),
                p99=percentile(seconds, 99),
            )
        )
    return result


@dataclass
class ScannerOutcomes:
    clean: int
    infected: int
    error: int


def scanner_outcomes(*, since: datetime | None = None, tenant_id: int | None = None) -> ScannerOutcomes:
    """Clean (passed scanning: ready), infected (rejected/malware), error (scan retries)."""
    attachments = _attachments(tenant_id)
    logs = _by_attachment_tenant(TransitionLog.objects.all(), tenant_id).filter(
        transition="retry", message__startswith="scan:"
    )
    if since is not None:
        attachments = attachments.filter(updated_at__gte=since)
        logs = logs.filter(created_at__gte=since)
    counts = attachments.aggregate(
        clean=Count("id", filter=Q(status=Status.READY)),
        infected=Count("id", filter=Q(status=Status.REJECTED, reason_code=ReasonCode.MALWARE)),
    )
    return ScannerOutcomes(clean=counts["clean"], infected=counts["infected"], error=logs.count())


def stuck_in_processing(*, now: datetime | None = None, tenant_id: int | None = None):
    """Attachments still processing after their lease ran out (a worker died or hangs)."""
    now = now or timezone.now()
    return (
        _attachments(tenant_id)
        .filter(status=Status.PROCESSING, lease_expires_at__lt=now)
        .select_related("owner", "tenant")
        .order_by("lease_expires_at")
    )


def oldest_pending_age(*, now: datetime | None = None, tenant_id: int | None = None) -> timedelta | None:
    """How long the oldest pending upload whose bytes arrived has waited for processing."""
    now = now or timezone.now()
    oldest = (
        _attachments(tenant_id)
        .filter(status=Status.PENDING, uploaded_at__isnull=False)
        .exclude(lifecycle__in=[Lifecycle.DISCARDED, Lifecycle.DELETED])
        .aggregate(oldest=Min("uploaded_at"))["oldest"]
    )
    return None if oldest is None else max(timedelta(0), now - oldest)


def dead_letters_waiting(*, tenant_id: int | None = None) -> int:
    return _by_attachment_tenant(DeadLetter.objects.all(), tenant_id).filter(resolved_at__isnull=True).count()


@dataclass
class Dashboard:
    now: datetime
    distribution: dict[str, int]
    timeline: list[Bucket]
    period: str
    latencies: list[Latency]
    scanner: ScannerOutcomes
    stuck_count: int
    stuck_sample: list[Attachment]
    oldest_pending: timedelta | None
    dead_letters: int
    notices: list[Notice] = field(default_factory=list)  # paused uploads, active brakes: the banner


def dashboard_snapshot(*, now: datetime | None = None, period: str = "24h", tenant_id: int | None = None) -> Dashboard:
    now = now or timezone.now()
    if period not in PERIODS:
        period = "24h"
    stuck = stuck_in_processing(now=now, tenant_id=tenant_id)
    return Dashboard(
        now=now,
        distribution=status_distribution(tenant_id=tenant_id),
        timeline=status_timeline(now=now, period=period, tenant_id=tenant_id),
        period=period,
        latencies=time_to_ready(now=now, tenant_id=tenant_id),
        scanner=scanner_outcomes(tenant_id=tenant_id),
        stuck_count=stuck.count(),
        stuck_sample=list(stuck[:20]),
        oldest_pending=oldest_pending_age(now=now, tenant_id=tenant_id),
        dead_letters=dead_letters_waiting(tenant_id=tenant_id),
        notices=service_notices(tenant_id=tenant_id),
    )
