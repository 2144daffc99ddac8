"""One delivery attempt: claim, sign, POST, record; retry with backoff, dead-letter, disable.

No transaction is open during the HTTP request: the delivery is claimed with a
lease (one UPDATE), the request is made, and the outcome is recorded in one
short transaction. A worker killed in between leaves the lease to expire, and
the tick sends the delivery again with the same webhook-id (at least once).
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import DateTimeField, F, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from attachments.jobs import WEBHOOK_DELIVER
from attachments.services import outbox

from .. import client, signing, urlguard
from ..metrics import DELIVERIES, DELIVERY_SECONDS
from ..models import DeliveryStatus, WebhookAttempt, WebhookDelivery, WebhookEndpoint
from .endpoints import endpoint_disable, secrets_for, url_for
from .fastpath_commit import bookkeeping

log = logging.getLogger("airlock.webhooks")

# Time a worker keeps a claimed delivery beyond the request timeout (signing, recording).
LEASE_MARGIN_SECONDS = 5.0


@dataclass(frozen=True)
class Result:
    ok: bool
    status_code: int | None
    error: str
    snippet: str
    latency_s: float | None
    retry_after: float | None = None


def _claim(delivery_id: int, now: datetime) -> bool:
    lease = now + timedelta(seconds=settings.AIRLOCK_WEBHOOK_DELIVERY.timeout_seconds + LEASE_MARGIN_SECONDS)
    with bookkeeping():
        return bool(
            WebhookDelivery.objects.filter(pk=delivery_id, status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
            .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
            .update(lease_until=lease, attempts=F("attempts") + 1)
        )


def backoff_seconds(attempts: int, *, retry_after: float | None = None) -> float:
    """Doubling from AIRLOCK_WEBHOOK_DELIVERY.retry_base_seconds, capped, ±20 % jitter; Retry-After is a floor."""
    base = settings.AIRLOCK_WEBHOOK_DELIVERY.retry_base_seconds
    cap = settings.AIRLOCK_WEBHOOK_DELIVERY.retry_max_seconds
    delay = min(cap, base * 2 ** max(0, attempts - 1)) * random.uniform(0.8, 1.2)
    if retry_after is not None:
        delay = max(delay, min(retry_after, cap))
    return delay


def _send(endpoint: WebhookEndpoint, *, msg_id: str, body: bytes, now: datetime) -> Result:
    url = url_for(endpoint)
    if not url:
        return Result(False, None, "AIRLOCK_WEBHOOK_URL is no longer set", "", None)
    timestamp = int(time.time())
    headers = signing.headers(msg_id=msg_id, timestamp=timestamp, body=body, secrets=secrets_for(endpoint, now))
    started = time.monotonic()
    try:
        target = urlguard.resolve(url)
    except urlguard.UrlRefused as exc:
        return Result(False, None, f"refused: {exc}", "", None)
    try:
        answer = client.post(
            target, body=body, headers=headers, timeout=settings.AIRLOCK_WEBHOOK_DELIVERY.timeout_seconds
        )
    except client.TransportError as exc:
        return Result(False, None, str(exc), "", time.monotonic() - started)
    latency = time.monotonic() - started
    ok = 200 <= answer.status < 300
    error = "" if ok else f"HTTP {answer.status}"
    return Result(ok, answer.status, error, answer.snippet, latency, answer.retry_after)


def delivery_endpoint_id(delivery_id: int) -> int | None:
    """The endpoint a delivery goes to (one narrow read), for messages that did not carry it."""
    return WebhookDelivery.objects.filter(pk=delivery_id).values_list("endpoint_id", flat=True).first()


def delivery_attempt(delivery_id: int) -> str | None:
    """Make one attempt if the delivery is due and nobody holds it; the outcome, or None when skipped."""
    now = timezone.now()
    if not _claim(delivery_id, now):
        return None  # delivered, dead, not due yet, or another worker has it: a duplicate message
    # get(), not filter().first(): first()'s ORDER BY would be a quarter of a delivery's CPU here.
    try:
        delivery = WebhookDelivery.objects.select_related("event", "endpoint").get(pk=delivery_id)
    except WebhookDelivery.DoesNotExist:
        return None  # its endpoint was deleted after the claim
    endpoint, event = delivery.endpoint, delivery.event
    if not endpoint.enabled:
        result = Result(False, None, "endpoint disabled", "", None)
    else:
        result = _send(endpoint, msg_id=event.id, body=event.body.encode("utf-8"), now=now)
    outcome = _record(delivery, result, started_at=now)
    DELIVERIES.labels(event=event.type, outcome=outcome).inc()
    if result.latency_s is not None:
        DELIVERY_SECONDS.observe(result.latency_s)
    log.info(
        "webhook delivery",
        extra={
            "step": "webhook",
            "outcome": outcome,
            "attachment_id": str(event.attachment_id),
            "event": event.type,
            "webhook_id": event.id,
            "endpoint": endpoint.pk,
            "status_code": result.status_code,
            "duration_ms": round((result.latency_s or 0) * 1000, 1),
            "error": result.error or None,
        },
    )
    return outcome


def _record(delivery: WebhookDelivery, result: Result, *, started_at: datetime) -> str:
    now = timezone.now()
    endpoint = delivery.endpoint
    disable_reason = ""
    with bookkeeping():
        WebhookAttempt.objects.create(
            delivery=delivery,
            started_at=started_at,
            status_code=result.status_code,
            ok=result.ok,
            latency_ms=None if result.latency_s is None else round(result.latency_s * 1000, 2),
            error=result.error[:500],
            response_snippet=result.snippet[:500],
        )
        pending = WebhookDelivery.objects.filter(pk=delivery.pk, status=DeliveryStatus.PENDING)
        common = {"lease_until": None, "last_status_code": result.status_code, "last_error": result.error[:500]}
        if result.ok:
            pending.update(status=DeliveryStatus.DELIVERED, delivered_at=now, **common)
            _endpoint_succeeded(endpoint, now)
            return "delivered"
        if not endpoint.enabled:
            pending.update(status=DeliveryStatus.DEAD, **common)
            return "dead"
        if result.status_code == 410:
            # Standard Webhooks: 410 Gone means the receiver wants no more of them.
            disable_reason = "the endpoint answered 410 Gone"
            outcome = "dead"
            pending.update(status=DeliveryStatus.DEAD, **common)
        else:
            delay = backoff_seconds(delivery.attempts, retry_after=result.retry_after)  # the claim counted this one
            next_at = now + timedelta(seconds=delay)
            window_end = delivery.window_started_at + timedelta(
                seconds=settings.AIRLOCK_WEBHOOK_DELIVERY.retry_window_seconds
            )
            if next_at > window_end:
                outcome = "dead"
                pending.update(status=DeliveryStatus.DEAD, **common)
            else:
                outcome = "retry"
                if pending.update(status=DeliveryStatus.PENDING, next_attempt_at=next_at, enqueued_at=now, **common):
                    outbox.enqueue(WEBHOOK_DELIVER, delivery.pk, delivery.endpoint_id, delay_ms=int(delay * 1000))
            disable_reason = _endpoint_failed(endpoint, now)
    if disable_reason:
        dropped = endpoint_disable(endpoint_id=endpoint.pk, reason=disable_reason, now=now)
        log.warning(
            "webhook endpoint disabled",
            extra={
                "step": "webhook",
                "outcome": "disabled",
                "endpoint": endpoint.pk,
                "error": disable_reason,
                "dead_lettered": dropped,
            },
        )
    return outcome


def _endpoint_succeeded(endpoint: WebhookEndpoint, now: datetime) -> None:
    # Written only when it says something new (a failing run ended, or once a minute):
    # every worker thread delivering to one endpoint would otherwise queue on its row.
    if (
        endpoint.failing_since is None
        and endpoint.last_success_at is not None
        and now - endpoint.last_success_at < timedelta(seconds=60)
    ):
        return
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
        failing_since=None, consecutive_failures=0, last_success_at=now
    )


# An endpoint is disabled once it has failed for this long without a success, and at
# least this many times (one lone failure after a quiet week is not "failing for long").
DISABLE_MIN_FAILURES = 10


def _endpoint_failed(endpoint: WebhookEndpoint, now: datetime) -> str:
    """Count the failure; a reason to disable the endpoint when it has been failing for long, else ''."""
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
        consecutive_failures=F("consecutive_failures") + 1,
        failing_since=Coalesce(F("failing_since"), Value(now, output_field=DateTimeField())),
    )
    since = endpoint.failing_since or now
    threshold = timedelta(seconds=settings.AIRLOCK_WEBHOOK_DELIVERY.disable_after_seconds)
    if now - since >= threshold and endpoint.consecutive_failures + 1 >= DISABLE_MIN_FAILURES:
        return f"failing since {since:%Y-%m-%d %H:%M:%S} UTC ({endpoint.consecutive_failures + 1} failures in a row)"
    return ""


def delivery_replay(*, delivery_ids: list[int], now: datetime | None = None) -> tuple[int, int]:
    """Send deliveries again (same webhook-id, new retry window); (replayed, refused: endpoint disabled)."""
    now = now or timezone.now()
    replayed = refused = 0
    with transaction.atomic():
        for delivery in (
            WebhookDelivery.objects.select_for_update()
            .filter(pk__in=delivery_ids)
            .select_related("endpoint")
            .order_by("pk")
        ):
            if not delivery.endpoint.enabled:
                refused += 1
                continue
            delivery.status = DeliveryStatus.PENDING
            delivery.next_attempt_at = delivery.window_started_at = delivery.enqueued_at = now
            delivery.save(update_fields=["status", "next_attempt_at", "window_started_at", "enqueued_at"])
            outbox.enqueue(WEBHOOK_DELIVER, delivery.pk, delivery.endpoint_id)
            replayed += 1
    return replayed, refused
