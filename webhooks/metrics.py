"""Webhook metrics: counters where deliveries happen, gauges from the database at scrape time."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime

from django.db import DatabaseError
from django.db.models import Min
from django.utils import timezone
from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

log = logging.getLogger("airlock.metrics")

# outcome: delivered (2xx), retry (failed, another attempt is scheduled), dead (failed for the
# last time, or its endpoint is disabled).
DELIVERIES = Counter(
    "airlock_webhook_deliveries_total",
    "Webhook delivery attempts by event type and outcome.",
    ["event", "outcome"],
)
DELIVERY_SECONDS = Histogram(
    "airlock_webhook_delivery_seconds",
    "Duration of each webhook HTTP request (connect to response).",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)


class WebhookCollector(Collector):
    """The oldest undelivered event's age and the disabled endpoints, read from the database."""

    def __init__(self, *, now: datetime | None = None) -> None:
        self._now = now

    def collect(self) -> Iterator[Metric]:
        from .models import DeliveryStatus, WebhookDelivery, WebhookEndpoint

        now = self._now or timezone.now()
        try:
            oldest = WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING).aggregate(oldest=Min("created_at"))[
                "oldest"
            ]
            disabled = WebhookEndpoint.objects.filter(enabled=False).count()
        except DatabaseError as exc:
            log.warning("metrics: webhook gauges unavailable", extra={"error": str(exc)[:300]})
            return
        yield GaugeMetricFamily(
            "airlock_webhook_oldest_undelivered_seconds",
            "Age of the oldest webhook event not yet delivered to an endpoint (0 when none waits).",
            value=max(0.0, (now - oldest).total_seconds()) if oldest else 0.0,
        )
        yield GaugeMetricFamily(
            "airlock_webhook_endpoints_disabled",
            "Webhook endpoints that are disabled (by staff or for failing).",
            value=disabled,
        )
