"""Endpoints: which ones want events (cached per process), the global one's row, rotation, enabling.

Every transition that can emit an event asks "who listens?". The answer is kept
in this process for CACHE_SECONDS, so a file that
reaches `ready` costs no query when nobody listens; a change saved in this
process refreshes it at once (signals.py), other processes see it within that
time.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from ..models import DeliveryStatus, WebhookDelivery, WebhookEndpoint


@dataclass(frozen=True)
class Listening:
    pk: int
    tenant_id: int | None  # None: the global endpoint (every tenant)
    event_types: tuple[str, ...]

    def wants(self, event_type: str, tenant_id: int) -> bool:
        return (self.tenant_id is None or self.tenant_id == tenant_id) and (
            not self.event_types or event_type in self.event_types
        )


# How late another process's endpoint change may apply here; a change saved here applies at once.
CACHE_SECONDS = 5.0
_lock = threading.Lock()
# (loaded at, the global URL it was loaded for, the endpoints) or None.
_cache: tuple[float, str | None, tuple[Listening, ...]] | None = None


def forget() -> None:
    """Drop this process's cached endpoints (an endpoint was saved or deleted here)."""
    global _cache
    with _lock:
        _cache = None


def prime_empty() -> None:
    """Cache "nobody listens" as of now: for a fresh database with no endpoint (tests)."""
    global _cache
    with _lock:
        _cache = (time.monotonic(), settings.AIRLOCK_WEBHOOK_URL, ()) if not settings.AIRLOCK_WEBHOOK_URL else None


def listening() -> tuple[Listening, ...]:
    """Enabled endpoints (the global one included while AIRLOCK_WEBHOOK_URL is set)."""
    global _cache
    url = settings.AIRLOCK_WEBHOOK_URL
    with _lock:
        cached = _cache
    if cached is not None and cached[1] == url and time.monotonic() - cached[0] < CACHE_SECONDS:
        return cached[2]
    loaded_at = time.monotonic()
    rows = list(
        WebhookEndpoint.objects.filter(enabled=True, is_global=False).values_list("pk", "tenant_id", "event_types")
    )
    found = [Listening(pk, tenant_id, tuple(types or ())) for pk, tenant_id, types in rows]
    wrote = False
    if url:
        row, wrote = _global_row(url)
        if row.enabled:
            found.append(Listening(row.pk, None, ()))
    result = tuple(found)
    if not wrote:  # a row this transaction created may still roll back: not cached until it is committed
        with _lock:
            _cache = (loaded_at, url, result)
    return result


def _global_row(url: str) -> tuple[WebhookEndpoint, bool]:
    """The global endpoint's row, created (or reset for a new URL) on first use; (row, written)."""
    row = WebhookEndpoint.objects.filter(is_global=True).first()
    if row is None:
        try:
            with transaction.atomic():
                return WebhookEndpoint.objects.create(
                    is_global=True,
                    url=url,
                    secret="",
                    description=("AIRLOCK_WEBHOOK_URL (its URL and secret come from settings)"),
                ), True
        except IntegrityError:  # another process created it first
            row = WebhookEndpoint.objects.get(is_global=True)
    if row.url != url:
        # A new URL is a new receiver: whatever made the old one fail says nothing about it.
        row.url, row.enabled, row.disabled_at, row.disabled_reason = url, True, None, ""
        row.failing_since, row.consecutive_failures = None, 0
        row.save(
            update_fields=[
                "url",
                "enabled",
                "disabled_at",
                "disabled_reason",
                "failing_since",
                "consecutive_failures",
                "updated_at",
            ]
        )
        return row, True
    return row, False


def secrets_for(endpoint: WebhookEndpoint, now: datetime) -> list[str]:
    """Every secret a delivery to this endpoint is signed with (two during a rotation's overlap)."""
    if endpoint.is_global:
        return list(settings.AIRLOCK_WEBHOOK_SECRET)
    secrets = [endpoint.secret]
    if endpoint.previous_secret and endpoint.previous_secret_expires_at and endpoint.previous_secret_expires_at > now:
        secrets.append(endpoint.previous_secret)
    return secrets


def url_for(endpoint: WebhookEndpoint) -> str | None:
    return settings.AIRLOCK_WEBHOOK_URL if endpoint.is_global else endpoint.url


def endpoint_rotate_secret(*, endpoint_id: int, now: datetime | None = None) -> WebhookEndpoint:
    """A new secret; the old one keeps signing for AIRLOCK_WEBHOOK_DELIVERY.rotation_overlap_seconds."""
    from ..signing import new_secret

    now = now or timezone.now()
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.select_for_update().get(pk=endpoint_id, is_global=False)
        endpoint.previous_secret = endpoint.secret
        endpoint.previous_secret_expires_at = now + timedelta(
            seconds=settings.AIRLOCK_WEBHOOK_DELIVERY.rotation_overlap_seconds
        )
        endpoint.secret = new_secret()
        endpoint.save(update_fields=["secret", "previous_secret", "previous_secret_expires_at", "updated_at"])
    return endpoint


def endpoint_enable(*, endpoint_id: int) -> None:
    WebhookEndpoint.objects.filter(pk=endpoint_id).update(
        enabled=True,
        disabled_at=None,
        disabled_reason="",
        failing_since=None,
        consecutive_failures=0,
        updated_at=timezone.now(),
    )
    forget()


def endpoint_disable(*, endpoint_id: int, reason: str, now: datetime | None = None) -> int:
    """Stop sending to an endpoint; what it was still owed is dead-lettered (replayable). Returns that count."""
    now = now or timezone.now()
    with transaction.atomic():
        WebhookEndpoint.objects.filter(pk=endpoint_id).update(
            enabled=False, disabled_at=now, disabled_reason=reason[:300], updated_at=now
        )
        dropped = WebhookDelivery.objects.filter(endpoint_id=endpoint_id, status=DeliveryStatus.PENDING).update(
            status=DeliveryStatus.DEAD, lease_until=None, last_error=f"endpoint disabled: {reason}"[:500]
        )
    forget()
    return dropped
