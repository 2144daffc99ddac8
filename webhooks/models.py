"""Webhooks: endpoints, the events they are owed, each delivery and every attempt at it.

An event is written in the transaction of the attachment change it reports,
with one delivery row per endpoint that wants it; the delivery row is the
system of record for "was it delivered", the broker only a doorbell.
"""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q

from attachments.models import Tenant

# The Standard Webhooks event types we send (docs/webhooks.md, docs/api.md).
EVENT_TYPES = (
    "attachment.ready",
    "attachment.rejected",
    "attachment.failed",
    "attachment.deleted",
    "attachment.committed",
    "attachment.rendition_ready",
    "attachment.approved",
    "attachment.declined",
)


def new_event_id() -> str:
    # The webhook-id header: stable across retries, never containing "." (the signed
    # content is id.timestamp.body).
    return f"msg_{uuid.uuid4().hex}"


def _new_secret() -> str:
    from .signing import new_secret

    return new_secret()


class WebhookEndpoint(models.Model):
    """Where events go: a tenant's endpoint (admin), or the global one (AIRLOCK_WEBHOOK_URL).

    The global endpoint's URL and secret live in settings; its row (tenant null,
    `is_global`) only holds its health: enabled, failing since, disabled why.
    """

    tenant = models.ForeignKey(
        Tenant, null=True, blank=True, on_delete=models.CASCADE, related_name="webhook_endpoints"
    )
    is_global = models.BooleanField(default=False, editable=False)
    url = models.CharField(max_length=2000)
    description = models.CharField(max_length=200, blank=True, default="")
    secret = models.CharField(max_length=200, default=_new_secret)
    # Kept during a rotation's overlap: deliveries are signed with both until it expires.
    previous_secret = models.CharField(max_length=200, blank=True, default="")
    previous_secret_expires_at = models.DateTimeField(null=True, blank=True)
    # Event types this endpoint wants; empty means all of them.
    event_types = models.JSONField(default=list, blank=True)
    enabled = models.BooleanField(default=True)
    disabled_at = models.DateTimeField(null=True, blank=True)
    disabled_reason = models.CharField(max_length=300, blank=True, default="")
    # First failure of the current run of failures (cleared by a success).
    failing_since = models.DateTimeField(null=True, blank=True)
    consecutive_failures = models.PositiveIntegerField(default=0)
    last_success_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["is_global"], condition=Q(is_global=True), name="webhookendpoint_one_global"
            ),
            models.CheckConstraint(
                condition=Q(is_global=True) | Q(tenant__isnull=False), name="webhookendpoint_tenant_or_global"
            ),
        ]

    def __str__(self) -> str:
        return f"global: {self.url}" if self.is_global else f"{self.tenant}: {self.url}"

    def wants(self, event_type: str) -> bool:
        return not self.event_types or event_type in self.event_types


class WebhookEvent(models.Model):
    """One thing that happened to one attachment, with the exact body every endpoint receives."""

    id = models.CharField(primary_key=True, max_length=40, default=new_event_id, editable=False)
    type = models.CharField(max_length=32)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+", db_index=False)
    # Not a foreign key: the event outlives the attachment row's purge (audit window).
    attachment_id = models.UUIDField(db_index=False)
    # The JSON body as sent, so every retry sends (and signs) the same bytes.
    body = models.TextField()
    created_at = models.DateTimeField(db_index=True)

    class Meta:
        indexes = [models.Index(fields=["attachment_id", "created_at"], name="webhookevent_attachment")]

    def __str__(self) -> str:
        return f"{self.type} {self.attachment_id} ({self.id})"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending"
    DELIVERED = "delivered"
    DEAD = "dead"


class WebhookDelivery(models.Model):
    """One event owed to one endpoint: retried until it is delivered or dead-lettered."""

    event = models.ForeignKey(WebhookEvent, on_delete=models.CASCADE, related_name="deliveries", db_index=False)
    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries")
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField()
    # Retries last AIRLOCK_WEBHOOK_DELIVERY.retry_window_seconds from here (reset by a replay).
    window_started_at = models.DateTimeField()
    next_attempt_at = models.DateTimeField()
    # A worker holds the delivery until then (set when it starts an attempt): a worker
    # killed mid-request leaves it to expire, and the tick sends the delivery again.
    lease_until = models.DateTimeField(null=True, blank=True)
    # When a message for it last went to the outbox: the tick re-drives only deliveries
    # whose message should long have arrived.
    enqueued_at = models.DateTimeField()
    delivered_at = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True, default="")

    class Meta:
        verbose_name_plural = "webhook deliveries"
        constraints = [models.UniqueConstraint(fields=["event", "endpoint"], name="webhookdelivery_once")]
        indexes = [
            # Due and stuck deliveries (the tick), and the oldest undelivered (metrics).
            models.Index(fields=["next_attempt_at"], name="webhookdelivery_pending", condition=Q(status="pending")),
        ]

    def __str__(self) -> str:
        return f"{self.event_id} → {self.endpoint_id} ({self.status})"


class WebhookAttempt(models.Model):
    """One HTTP request of a delivery: what came back and how long it took."""

    delivery = models.ForeignKey(WebhookDelivery, on_delete=models.CASCADE, related_name="attempt_log")
    started_at = models.DateTimeField()
    latency_ms = models.FloatField(null=True, blank=True)
    status_code = models.PositiveIntegerField(null=True, blank=True)
    ok = models.BooleanField(default=False)
    error = models.CharField(max_length=500, blank=True, default="")
    response_snippet = models.CharField(max_length=500, blank=True, default="")

    class Meta:
        ordering = ["started_at", "id"]

    def __str__(self) -> str:
        return f"{self.delivery_id} @ {self.started_at:%Y-%m-%d %H:%M:%S}: {self.status_code or self.error}"
