"""The scheduler tick's webhook work: re-drive deliveries whose message got lost.

Old history (events, deliveries, attempts) is purged by the sweeper's retention
phase (sweeper/retention.py, AIRLOCK_RETENTION_DAYS.webhooks), under its brakes.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from attachments.jobs import WEBHOOK_DELIVER
from attachments.services import outbox

from ..models import DeliveryStatus, WebhookDelivery

log = logging.getLogger("airlock.webhooks")

_ticked = False
_tick_lock = threading.Lock()


def _broker_is_in_process() -> bool:
    import dramatiq
    from dramatiq.brokers.stub import StubBroker

    return isinstance(dramatiq.get_broker(), StubBroker)


def run_tick(*, now: datetime | None = None) -> None:
    global _ticked
    with _tick_lock:
        first, _ticked = not _ticked, True
    # An in-process broker's messages died with the previous process: on this process's
    # first tick everything due is sent again at once (a duplicate of a message this
    # process already holds finds the delivery claimed or done and does nothing).
    redrive(now=now, grace_seconds=0 if first and _broker_is_in_process() else None)


def redrive(*, now: datetime | None = None, limit: int = 1000, grace_seconds: float | None = None) -> int:
    """Send again the deliveries that are due and unheld but whose message never came.

    A worker killed mid-request (its lease expires), a broker that lost the
    message, an in-process broker that died with its process: all look alike
    here: due for a while (AIRLOCK_WEBHOOK_DELIVERY.redrive_seconds), not sent for as long.
    """
    now = now or timezone.now()
    grace = settings.AIRLOCK_WEBHOOK_DELIVERY.redrive_seconds if grace_seconds is None else grace_seconds
    stale = now - timedelta(seconds=grace)
    with transaction.atomic():
        rows = list(
            WebhookDelivery.objects.filter(
                status=DeliveryStatus.PENDING, next_attempt_at__lte=stale, enqueued_at__lte=stale
            )
            .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
            .order_by("next_attempt_at")
            .values_list("pk", "endpoint_id")[:limit]
        )
        # A delivery parked behind its endpoint's cap is waiting, not lost: touched, not sent twice.
        parked = _parked_deliveries({endpoint_id for _, endpoint_id in rows})
        lost = [(pk, endpoint_id) for pk, endpoint_id in rows if str(pk) not in parked.get(endpoint_id, ())]
        if rows:
            WebhookDelivery.objects.filter(pk__in=[pk for pk, _ in rows]).update(enqueued_at=now)
            for pk, endpoint_id in lost:
                outbox.enqueue(WEBHOOK_DELIVER, pk, endpoint_id)
    if lost:
        log.info("webhook deliveries re-driven", extra={"step": "webhook", "outcome": "redriven", "count": len(lost)})
    return len(lost)


def _parked_deliveries(endpoint_ids: set[int]) -> dict[int, set[str]]:
    """Per endpoint, the deliveries waiting in its waiting room (processing/fairness.py)."""
    from processing import fairness, tenant_slots

    if not endpoint_ids or not fairness.stage_is_capped(fairness.WEBHOOK):
        return {}
    found: dict[int, set[str]] = {}
    for endpoint_id in endpoint_ids:
        try:
            found[endpoint_id] = tenant_slots.backend().parked_files(str(endpoint_id), stage=fairness.WEBHOOK)
        except Exception as exc:  # cannot tell: send it again, the safe side (a duplicate is harmless)
            log.warning("could not read parked deliveries", extra={"endpoint": endpoint_id, "error": str(exc)[:300]})
    return found
