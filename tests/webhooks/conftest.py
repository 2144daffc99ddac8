"""Webhook tests: a loopback receiver, endpoints, and running due deliveries inline."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from .receiver import Receiver


@pytest.fixture(autouse=True)
def webhook_settings(settings):
    # The receiver is on loopback: allowed here, refused by default (tests/webhooks/test_ssrf.py).
    settings.AIRLOCK_WEBHOOK_ALLOW_PRIVATE = True
    settings.AIRLOCK_WEBHOOK_DELIVERY = settings.AIRLOCK_WEBHOOK_DELIVERY.replace(
        timeout_seconds=2.0, retry_base_seconds=0.05, retry_max_seconds=0.2
    )
    # Links in the payload are absolute as in the API's answers to the test client.
    settings.AIRLOCK_PUBLIC_URL = "http://testserver"
    from webhooks import urlguard

    urlguard.forget_resolutions()
    yield settings
    urlguard.forget_resolutions()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver().start()
    yield server
    server.stop()


@pytest.fixture
def make_endpoint(db) -> Callable:
    from attachments.models import Tenant
    from webhooks.models import WebhookEndpoint

    def make(url: str, *, tenant: str = "acme", event_types: list[str] | None = None) -> WebhookEndpoint:
        tenant_obj, _ = Tenant.objects.get_or_create(slug=tenant, defaults={"name": tenant})
        return WebhookEndpoint.objects.create(tenant=tenant_obj, url=url, event_types=event_types or [])

    return make


def deliver_due(timeout: float = 10.0) -> int:
    """Run every due delivery inline, as the actor would, until none is pending; the attempts made."""
    from django.utils import timezone

    from webhooks.models import DeliveryStatus, WebhookDelivery
    from webhooks.services.delivery import delivery_attempt

    made = 0
    deadline = time.monotonic() + timeout
    while True:
        pending = WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING)
        if not pending.exists():
            return made
        due = list(pending.filter(next_attempt_at__lte=timezone.now()).values_list("pk", flat=True))
        for pk in due:
            made += delivery_attempt(pk) is not None
        if time.monotonic() > deadline:
            raise AssertionError(f"deliveries still pending after {timeout}s")
        if not due:
            time.sleep(0.02)


def verified(received, secret: str) -> dict:
    """The payload, once the Standard Webhooks reference library accepts its signature."""
    from standardwebhooks import Webhook

    return Webhook(secret).verify(received.body, received.headers)
