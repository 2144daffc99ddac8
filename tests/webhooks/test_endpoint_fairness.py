"""A slow endpoint, or a flood of events to one endpoint, does not hold up other endpoints' deliveries."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.db import transaction

from tests.faults.support import wait_until
from tests.support import jpeg_bytes, upload
from webhooks.models import DeliveryStatus, WebhookDelivery
from webhooks.services.emit import emit

from .receiver import Receiver

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fresh_slots(monkeypatch, settings):
    from attachments.shared_redis import backend_redis
    from processing import tenant_slots

    slots = (
        tenant_slots.RedisSlots(backend_redis(), f"{settings.AIRLOCK_KEY_PREFIX}-{uuid.uuid4().hex[:8]}")
        if settings.REDIS_URL
        else tenant_slots.MemorySlots()
    )
    monkeypatch.setattr(tenant_slots.backend, "value", slots)
    return slots


def test_a_hanging_endpoints_flood_waits_parked_while_another_endpoint_is_served(
    alice, mallory, api, live_worker, make_endpoint, fresh_slots, settings
):
    settings.AIRLOCK_WEBHOOK_DELIVERY = settings.AIRLOCK_WEBHOOK_DELIVERY.replace(endpoint_concurrency=2)
    # the hanging endpoint is not cut short during the test
    settings.AIRLOCK_WEBHOOK_DELIVERY = settings.AIRLOCK_WEBHOOK_DELIVERY.replace(timeout_seconds=30.0)
    gate, arrived = threading.Event(), []

    def hang(request):
        arrived.append(request)
        gate.wait(60)
        return 204, b"", 0.0

    hanging = Receiver(hang).start()
    healthy = Receiver().start()
    try:
        slow = make_endpoint(hanging.url, tenant="acme", event_types=["attachment.committed"])
        fast = make_endpoint(healthy.url, tenant="evil", event_types=["attachment.committed"])
        flood = [upload(api(alice), jpeg_bytes((40 + i, 30))) for i in range(10)]
        other = upload(api(mallory), jpeg_bytes((80, 60)))
        with transaction.atomic():
            emit(event_type="attachment.committed", attachment_ids=flood)
        wait_until(lambda: len(arrived) == 2, 30, "two deliveries in flight to the hanging endpoint")
        wait_until(
            lambda: len(fresh_slots.parked_files(str(slow.pk), stage="webhook")) == 8,
            30,
            "the rest of the flood parked",
        )
        with transaction.atomic():
            emit(event_type="attachment.committed", attachment_ids=[other])
        healthy.wait_for(lambda r: len(r) >= 1, timeout=20)
        wait_until(
            lambda: WebhookDelivery.objects.get(endpoint=fast).status == DeliveryStatus.DELIVERED,
            10,
            "the other endpoint's delivery recorded",
        )
        # The other endpoint was served while the flood still waited: two held, none done.
        assert len(arrived) == 2
        assert not WebhookDelivery.objects.filter(endpoint=slow, status=DeliveryStatus.DELIVERED).exists()
    finally:
        gate.set()
    wait_until(
        lambda: WebhookDelivery.objects.filter(endpoint=slow, status=DeliveryStatus.DELIVERED).count() == 10,
        60,
        "the flood delivered once the endpoint answers",
    )
    hanging.stop()
    healthy.stop()
