"""The wedding host's own records: events (each with its Airlock upload link) and what it heard of guests' files."""

from __future__ import annotations

import secrets

from django.db import models


def _share_key() -> str:
    return secrets.token_urlsafe(16)


class Event(models.Model):
    # The couple is the browser session here (no accounts in a demo); a real host uses its users.
    couple = models.CharField(max_length=64, db_index=True)
    title = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
    # Airlock's upload link for the event: guests open `link_url` (the QR code's content).
    link_id = models.CharField(max_length=64, blank=True)
    link_url = models.URLField(max_length=2000, blank=True)
    qr_svg_url = models.URLField(max_length=2000, blank=True)
    link_expires_at = models.DateTimeField(null=True, blank=True)
    qr_svg = models.TextField(blank=True)  # fetched once from Airlock, served from here
    # Whoever has the gallery's address sees the approved photos and videos (the couple shares it).
    share_key = models.CharField(max_length=32, unique=True, default=_share_key)

    @property
    def ref(self) -> str:
        """The reference the event's files are committed to in Airlock."""
        return f"event:{self.pk}"


class GuestFile(models.Model):
    """A file a guest sent through the event's link, as this host last heard of it from Airlock's webhooks."""

    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="files")
    attachment_id = models.UUIDField(unique=True)
    filename = models.CharField(max_length=255, blank=True)
    status = models.CharField(max_length=16)  # Airlock's status, or `deleted`
    approval = models.CharField(max_length=16, blank=True)  # pending | approved | declined
    # The newest event applied: webhooks are not ordered, an older one never overwrites a newer one.
    event_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("pk",)


class WebhookDelivery(models.Model):
    """Webhook ids already applied: delivery is at least once, so a repeat is acknowledged and ignored."""

    webhook_id = models.CharField(max_length=100, unique=True)
    received_at = models.DateTimeField(auto_now_add=True)
