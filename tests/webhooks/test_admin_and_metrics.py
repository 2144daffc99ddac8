"""The admin shows endpoints, deliveries and attempts and replays; /metrics has the webhook series."""

from __future__ import annotations

import pytest

from tests.ops.conftest import metric_value
from tests.support import jpeg_bytes, run_pipeline, upload
from webhooks.models import DeliveryStatus, WebhookDelivery, WebhookEndpoint

from .conftest import deliver_due
from .receiver import Receiver

pytestmark = pytest.mark.django_db


def _fail_then(statuses):
    def respond(request):
        return (statuses.pop(0) if len(statuses) > 1 else statuses[0]), b"nope", 0.0

    return respond


def test_the_admin_lists_endpoints_deliveries_and_attempts_and_replays(
    admin_client, alice, api, make_endpoint, settings
):
    settings.AIRLOCK_WEBHOOK_DELIVERY = settings.AIRLOCK_WEBHOOK_DELIVERY.replace(retry_window_seconds=0.1)
    receiver = Receiver(_fail_then([500])).start()
    try:
        endpoint = make_endpoint(receiver.url)
        assert run_pipeline(upload(api(alice), jpeg_bytes())) == "ready"
        deliver_due()
        delivery = WebhookDelivery.objects.get()
        assert delivery.status == DeliveryStatus.DEAD

        page = admin_client.get("/admin/webhooks/webhookendpoint/").content.decode()
        assert receiver.url in page
        page = admin_client.get(f"/admin/webhooks/webhookendpoint/{endpoint.pk}/change/").content.decode()
        assert endpoint.secret in page  # the receiver's operator copies it from here
        page = admin_client.get("/admin/webhooks/webhookdelivery/?status=dead").content.decode()
        assert "attachment.ready" in page and "HTTP 500" in page
        page = admin_client.get(f"/admin/webhooks/webhookdelivery/{delivery.pk}/change/").content.decode()
        assert delivery.event_id in page and "nope" in page  # the attempts, with the answer's start

        receiver.respond = _fail_then([200])
        settings.AIRLOCK_WEBHOOK_DELIVERY = settings.AIRLOCK_WEBHOOK_DELIVERY.replace(retry_window_seconds=60)
        response = admin_client.post(
            "/admin/webhooks/webhookdelivery/", {"action": "replay", "_selected_action": [delivery.pk]}, follow=True
        )
        assert "Replaying 1 deliveries" in response.content.decode()
        deliver_due()
        delivery.refresh_from_db()
        assert delivery.status == DeliveryStatus.DELIVERED
        assert {r.webhook_id for r in receiver.received} == {delivery.event_id}
    finally:
        receiver.stop()


def test_the_admin_rotates_disables_and_enables(admin_client, make_endpoint, receiver):
    endpoint = make_endpoint(receiver.url)
    old = endpoint.secret
    admin_client.post(
        "/admin/webhooks/webhookendpoint/", {"action": "rotate_secret", "_selected_action": [endpoint.pk]}
    )
    endpoint.refresh_from_db()
    assert endpoint.secret != old and endpoint.previous_secret == old
    admin_client.post("/admin/webhooks/webhookendpoint/", {"action": "disable", "_selected_action": [endpoint.pk]})
    endpoint.refresh_from_db()
    assert not endpoint.enabled and endpoint.disabled_reason.startswith("disabled by staff:")
    admin_client.post("/admin/webhooks/webhookendpoint/", {"action": "enable", "_selected_action": [endpoint.pk]})
    endpoint.refresh_from_db()
    assert endpoint.enabled and endpoint.disabled_reason == ""


def test_the_admin_adds_an_endpoint_with_its_own_secret(admin_client, receiver):
    from attachments.models import Tenant

    tenant = Tenant.objects.create(slug="acme")
    response = admin_client.post(
        "/admin/webhooks/webhookendpoint/add/",
        {
            "tenant": tenant.pk,
            "url": receiver.url,
            "description": "crm",
            "event_types": ["attachment.ready"],
            "enabled": "on",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    endpoint = WebhookEndpoint.objects.get()
    assert endpoint.secret.startswith("whsec_") and endpoint.event_types == ["attachment.ready"]


def test_enabling_on_the_edit_page_forgives_the_failures_as_the_action_does(admin_client, make_endpoint, receiver):
    """Else the next failure finds it failing for days and ten times in a row, and disables it again at once."""
    from datetime import timedelta

    from django.utils import timezone

    endpoint = make_endpoint(receiver.url)
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
        enabled=False,
        disabled_reason="failing since Monday",
        failing_since=timezone.now() - timedelta(days=4),
        consecutive_failures=40,
    )
    response = admin_client.post(
        f"/admin/webhooks/webhookendpoint/{endpoint.pk}/change/",
        {"tenant": endpoint.tenant_id, "url": receiver.url, "description": "", "enabled": "on"},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    endpoint.refresh_from_db()
    assert endpoint.enabled and endpoint.disabled_reason == ""
    assert (endpoint.failing_since, endpoint.consecutive_failures) == (None, 0)


def test_tenant_moderators_do_not_see_webhooks(client, make_user):
    from attachments.services.staff import moderator_group_ensure

    moderator = make_user("tenantmod", tenant="acme", staff=True)
    moderator.groups.add(moderator_group_ensure())
    client.force_login(moderator)
    assert client.get("/admin/webhooks/webhookendpoint/").status_code == 403
    assert client.get("/admin/webhooks/webhookdelivery/").status_code == 403


def test_metrics_count_deliveries_and_show_the_oldest_undelivered(client, alice, api, make_endpoint, settings):
    receiver = Receiver(_fail_then([500, 200])).start()
    try:
        make_endpoint(receiver.url)
        before = client.get("/metrics").content.decode()
        assert run_pipeline(upload(api(alice), jpeg_bytes())) == "ready"
        WebhookDelivery.objects.update(created_at=WebhookDelivery.objects.get().created_at.replace(year=2020))
        text = client.get("/metrics").content.decode()
        assert metric_value(text, "airlock_webhook_oldest_undelivered_seconds") > 86400
        deliver_due()
        text = client.get("/metrics").content.decode()
        for outcome in ("retry", "delivered"):
            labels = {"event": "attachment.ready", "outcome": outcome}
            assert (
                metric_value(text, "airlock_webhook_deliveries_total", labels)
                == metric_value(before, "airlock_webhook_deliveries_total", labels) + 1
            )
        assert (
            metric_value(text, "airlock_webhook_delivery_seconds_count")
            >= metric_value(before, "airlock_webhook_delivery_seconds_count") + 2
        )
        assert metric_value(text, "airlock_webhook_oldest_undelivered_seconds") == 0
        assert "# HELP airlock_webhook_endpoints_disabled " in text
    finally:
        receiver.stop()
