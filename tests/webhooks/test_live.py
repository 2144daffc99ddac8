"""Through a real Dramatiq worker on the configured broker (in-process without REDIS_URL, Redis with it).

The outbox relays the delivery job after the change commits, the worker
delivers it; a 500 is retried by a delayed message with the same webhook-id.
"""

from __future__ import annotations

import time

import pytest

from tests.support import jpeg_bytes, upload, wait_for_status
from webhooks.models import DeliveryStatus, WebhookDelivery

from .conftest import verified
from .receiver import Receiver

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_file_processed_by_the_worker_is_announced(alice, api, live_worker, make_endpoint, receiver):
    endpoint = make_endpoint(receiver.url)
    attachment_id = upload(api(alice), jpeg_bytes())
    assert wait_for_status(attachment_id) == "ready"
    [got] = receiver.wait_for(lambda r: len(r) >= 1, timeout=30)
    payload = verified(got, endpoint.secret)
    assert payload["type"] == "attachment.ready" and payload["data"]["id"] == attachment_id
    assert payload["data"] == api(alice).get(f"/api/v1/attachments/{attachment_id}").json()
    response = api(alice).post("/api/v1/attachments/commit", {"ids": [attachment_id], "ref": "r:1"}, format="json")
    assert response.status_code == 200
    committed = receiver.wait_for(lambda r: len(r) >= 2, timeout=30)[1]
    assert verified(committed, endpoint.secret)["type"] == "attachment.committed"


def test_the_worker_retries_a_500_with_the_same_webhook_id(alice, api, live_worker, make_endpoint):
    answers = [500, 500, 204]
    receiver = Receiver(lambda request: (answers.pop(0) if len(answers) > 1 else answers[0], b"", 0.0)).start()
    try:
        endpoint = make_endpoint(receiver.url)
        attachment_id = upload(api(alice), jpeg_bytes())
        assert wait_for_status(attachment_id) == "ready"
        got = receiver.wait_for(lambda r: len(r) >= 3, timeout=30)
        assert len({r.webhook_id for r in got}) == 1
        for r in got:
            verified(r, endpoint.secret)
        delivery = WebhookDelivery.objects.get()
        for _ in range(100):
            delivery.refresh_from_db()
            if delivery.status != DeliveryStatus.PENDING:
                break
            time.sleep(0.05)
        assert delivery.status == DeliveryStatus.DELIVERED and delivery.attempts == 3
    finally:
        receiver.stop()
