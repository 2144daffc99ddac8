"""Events written in the transaction of the change they report, with a delivery job per endpoint."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from attachments.api.serializers import UtcDateTimeField, attachment_resource
from attachments.jobs import WEBHOOK_DELIVER
from attachments.models import Attachment
from attachments.selectors import can_read_file, full_size_refused, thumbnail_dims
from attachments.services import outbox

from ..models import DeliveryStatus, WebhookDelivery, WebhookEndpoint, WebhookEvent
from .endpoints import listening

_TIMESTAMP = UtcDateTimeField()  # the contract's UTC `Z` form, as in the resource itself


class _NoRequest:
    """What absolute_url() asks of a request when AIRLOCK_PUBLIC_URL is unset: links stay paths."""

    @staticmethod
    def build_absolute_uri(location: str) -> str:
        return location


def render(event_type: str, attachment: Attachment, now: datetime) -> str:
    """The event body: the attachment resource as its owner's GET /api/v1/attachments/{id} shows it."""
    owner = attachment.owner
    readable = can_read_file(user=owner, attachment=attachment, now=now)
    thumbnail = thumbnail_dims(attachment) if readable else None
    refused = full_size_refused(user=owner, attachment=attachment)  # a guest's file waiting for approval
    data = attachment_resource(
        attachment, _NoRequest(), can_read=readable, thumbnail=thumbnail, now=now, full_size_refused=refused
    )
    body = {"type": event_type, "timestamp": _TIMESTAMP.to_representation(now), "data": data}
    return json.dumps(body, separators=(",", ":"))


def on_outcome(sender: object, *, outcome: str, ids: Sequence[Any], **kwargs: object) -> None:
    """Receiver of attachments.hooks.outcome_reached: record `attachment.<outcome>` for every endpoint that wants it."""
    event_type = f"attachment.{outcome}"
    endpoints = [e for e in listening() if not e.event_types or event_type in e.event_types]
    if endpoints:
        emit(event_type=event_type, attachment_ids=ids, endpoints=endpoints)


def emit(
    *, event_type: str, attachment_ids: Sequence[Any], endpoints=None, now: datetime | None = None
) -> list[WebhookEvent]:
    """Write the events and their deliveries; each delivery's job goes through the outbox on commit."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("webhook events are written inside the transaction of the change they report")
    now = now or timezone.now()
    endpoints = listening() if endpoints is None else endpoints
    attachments = (
        Attachment.objects.filter(pk__in=list(attachment_ids))
        .select_related("owner__membership")
        .for_resource("owner__membership__tenant_id", "owner__id")
    )
    events: list[WebhookEvent] = []
    deliveries: list[WebhookDelivery] = []
    for attachment in attachments:
        targets = [e for e in endpoints if e.wants(event_type, attachment.tenant_id)]
        if not targets:
            continue
        event = WebhookEvent(
            type=event_type,
            tenant_id=attachment.tenant_id,
            attachment_id=attachment.pk,
            body=render(event_type, attachment, now),
            created_at=now,
        )
        events.append(event)
        deliveries += [
            WebhookDelivery(
                event=event,
                endpoint_id=e.pk,
                status=DeliveryStatus.PENDING,
                created_at=now,
                window_started_at=now,
                next_attempt_at=now,
                enqueued_at=now,
            )
            for e in targets
        ]
    if not events:
        return []
    # `endpoints` may be another process's cache, up to a few seconds old: a delivery to an endpoint
    # deleted since would fail its foreign key at commit and abort the change it reports.
    wanted = {delivery.endpoint_id for delivery in deliveries}
    existing = set(WebhookEndpoint.objects.filter(pk__in=wanted).values_list("pk", flat=True))
    if existing != wanted:
        deliveries = [delivery for delivery in deliveries if delivery.endpoint_id in existing]
    WebhookEvent.objects.bulk_create(events)
    WebhookDelivery.objects.bulk_create(deliveries)
    # One INSERT for all their jobs: a sweep batch reports hundreds of deletes at once.
    outbox.enqueue_many(WEBHOOK_DELIVER, [(delivery.pk, delivery.endpoint_id) for delivery in deliveries])
    return events
