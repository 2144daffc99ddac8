"""What `/metrics` exposes: the process counters plus gauges read from the database.

Counters and histograms (scan results, step durations, time to ready,
sandbox kills, sweeper deletes) are recorded where the events happen
(processing/metrics.py, sweeper/metrics.py). Gauges that describe the
system rather than one process (how many attachments in each state, how
many are stuck, the oldest pending one, open dead letters) come from the
database, the system of record, with a few cheap aggregate queries run at
scrape time by ``DatabaseCollector`` — so every web process reports the
same truth and nothing has to keep a gauge in sync.

Several processes (gunicorn workers, `rundramatiq` workers) each keep their
own counters. Set PROMETHEUS_MULTIPROC_DIR (an empty directory shared by all
of them, wiped before they start) and every process writes its samples
there; `/metrics` then aggregates them with prometheus_client's
MultiProcessCollector. Without it, `/metrics` shows this process's counters.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING

from django.db import DatabaseError
from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from attachments.models import TenantUsage

log = logging.getLogger("airlock.metrics")


class DatabaseCollector(Collector):
    """Gauges computed from the database at scrape time (a handful of indexed aggregates)."""

    def __init__(self, *, now: datetime | None = None) -> None:
        self._now = now

    def collect(self) -> Iterator[Metric]:
        from django.conf import settings

        from attachments.models import Attachment, DeadLetter, Lifecycle, Status, TenantUsage
        from attachments.profiles import all_profiles
        from attachments.services.queue_consumers import queue_consumers_report

        now = self._now or timezone.now()
        started = time.monotonic()
        up = GaugeMetricFamily(
            "airlock_metrics_database_up",
            "1 when the database gauges below could be read at this scrape.",
        )
        try:
            by_state = list(
                Attachment.objects.exclude(lifecycle=Lifecycle.DELETED)
                .values_list("status", "profile")
                .annotate(n=Count("id"))
                .order_by()
            )
            stuck = Attachment.objects.filter(status=Status.PROCESSING, lease_expires_at__lt=now).count()
            oldest = (
                Attachment.objects.filter(status=Status.PENDING, uploaded_at__isnull=False)
                .exclude(lifecycle__in=[Lifecycle.DISCARDED, Lifecycle.DELETED])
                .aggregate(oldest=Min("uploaded_at"))["oldest"]
            )
            dead = dict(
                DeadLetter.objects.filter(resolved_at__isnull=True)
                .values_list("kind")
                .annotate(n=Count("id"))
                .order_by()
            )
            consumers = queue_consumers_report(now=now)
            # One counter row per tenant (attachments/services/quotas.py): no sums at scrape time.
            # Tenant slugs and their usage are shown only when asked for (AIRLOCK_METRICS.tenant_labels).
            usage = (
                list(TenantUsage.objects.select_related("tenant").order_by("tenant__slug"))
                if settings.AIRLOCK_METRICS.tenant_labels
                else None
            )
        except DatabaseError as exc:
            log.warning("metrics: database gauges unavailable", extra={"error": str(exc)[:300]})
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up

        attachments = GaugeMetricFamily(
            "airlock_attachments",
            "Attachments by processing status and profile (soft-deleted rows excluded).",
            labels=["status", "profile"],
        )
        counts: dict[tuple[str, str], int] = {
            (status, profile): 0 for status in Status.values for profile in all_profiles()
        }
        for status, profile, n in by_state:
            counts[(status, profile)] = n
        for (status, profile), n in sorted(counts.items()):
            attachments.add_metric([status, profile], n)
        yield attachments

        yield GaugeMetricFamily(
            "airlock_processing_stuck",
            "Attachments in processing whose lease has expired (the reconciler will retry them).",
            value=stuck,
        )
        yield GaugeMetricFamily(
            "airlock_oldest_pending_seconds",
            "Age of the oldest pending attachment whose bytes have arrived (0 when none waits).",
            value=max(0.0, (now - oldest).total_seconds()) if oldest else 0.0,
        )
        letters = GaugeMetricFamily("airlock_dead_letters", "Unresolved dead letters, by kind.", labels=["kind"])
        for kind in DeadLetter.Kind.values:
            letters.add_metric([kind], dead.get(kind, 0))
        yield letters
        backlog = GaugeMetricFamily(
            "airlock_storage_queue_backlog",
            "Messages waiting in each storage-event queue, as its consumer last saw it (pull response).",
            labels=["queue"],
        )
        poll_age = GaugeMetricFamily(
            "airlock_storage_queue_poll_age_seconds",
            "Seconds since each storage-event queue consumer last polled its queue.",
            labels=["queue"],
        )
        for consumer in consumers:
            if consumer["backlog"] is not None:
                backlog.add_metric([consumer["name"]], consumer["backlog"])
            poll_age.add_metric([consumer["name"]], consumer["polled_seconds_ago"])
        yield backlog
        yield poll_age
        if usage is not None:
            yield from _tenant_families(usage)
        yield GaugeMetricFamily(
            "airlock_metrics_database_seconds",
            "Time spent reading the database gauges at this scrape.",
            value=round(time.monotonic() - started, 6),
        )


def _tenant_families(usage: list[TenantUsage]) -> Iterator[Metric]:
    """airlock_tenant_*{tenant="<slug>"}: each tenant's usage and quota."""
    from attachments.services.quotas import tenant_limits

    families = {
        name: GaugeMetricFamily(f"airlock_tenant_{name}", text, labels=["tenant"])
        for name, text in (
            ("bytes_used", "Bytes counted against each tenant's quota."),
            ("files_used", "Files counted against each tenant's quota."),
            ("bytes_limit", "Each tenant's byte quota (tenants without one are left out)."),
            ("files_limit", "Each tenant's file quota (tenants without one are left out)."),
        )
    }
    for row in usage:
        slug = row.tenant.slug
        limit_bytes, limit_files = tenant_limits(row.tenant)
        families["bytes_used"].add_metric([slug], row.bytes_used)
        families["files_used"].add_metric([slug], row.files_used)
        if limit_bytes is not None:
            families["bytes_limit"].add_metric([slug], limit_bytes)
        if limit_files is not None:
            families["files_limit"].add_metric([slug], limit_files)
    yield from families.values()


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or os.environ.get("prometheus_multiproc_dir") or None


class _Scrape:
    """A registry-like object for generate_latest(): process metrics, then the database gauges."""

    def __init__(self, collectors: Iterable[Collector]) -> None:
        self.collectors = list(collectors)

    def collect(self) -> Iterator[Metric]:
        for collector in self.collectors:
            yield from collector.collect()


def scrape_registry() -> _Scrape:
    """Everything one scrape exposes, honouring PROMETHEUS_MULTIPROC_DIR."""
    # Register every family even in a web process that has not run a job yet,
    # so the series exist (at zero) from the first scrape.
    import processing.metrics  # noqa: F401
    import sweeper.metrics  # noqa: F401

    if multiprocess_dir():
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        process: Collector = registry
    else:
        process = REGISTRY
    from webhooks.metrics import WebhookCollector

    return _Scrape([process, DatabaseCollector(), WebhookCollector()])


def render_latest() -> tuple[bytes, str]:
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    return generate_latest(scrape_registry()), CONTENT_TYPE_LATEST
