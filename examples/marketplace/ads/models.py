"""The marketplace's own records: ads (a draft until posted) and the photos Airlock holds for them."""

from __future__ import annotations

from django.db import models


class Ad(models.Model):
    class State(models.TextChoices):
        DRAFT = "draft"
        POSTED = "posted"
        CANCELLED = "cancelled"

    # The seller is the browser session here (no accounts in a demo); a real host uses its users.
    seller = models.CharField(max_length=64, db_index=True)
    title = models.CharField(max_length=200, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.DRAFT)
    created_at = models.DateTimeField(auto_now_add=True)
    posted_at = models.DateTimeField(null=True, blank=True)

    @property
    def ref(self) -> str:
        """The reference the ad's photos are committed to in Airlock."""
        return f"ad:{self.pk}"


class Photo(models.Model):
    """One attachment in Airlock, as this host last heard of it (from its own calls and the webhooks)."""

    class Status(models.TextChoices):
        UPLOADING = "uploading"  # intent made, the browser is sending the bytes
        PENDING = "pending"  # bytes sent, Airlock is checking them
        READY = "ready"
        REJECTED = "rejected"
        FAILED = "failed"
        DISCARDED = "discarded"  # the draft was cancelled
        DELETED = "deleted"  # Airlock removed it (swept after the draft was abandoned, taken down…)

    ad = models.ForeignKey(Ad, on_delete=models.CASCADE, related_name="photos")
    attachment_id = models.UUIDField(unique=True)
    filename = models.CharField(max_length=255)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.UPLOADING)
    reason = models.CharField(max_length=500, blank=True)
    committed = models.BooleanField(default=False)
    thumbnail_url = models.URLField(max_length=2000, blank=True)
    thumbnail_expires = models.IntegerField(default=0)  # the signed link's `exp` (Unix seconds)
    # The newest event applied: webhooks are not ordered, an older one never overwrites a newer one.
    event_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("created_at", "pk")


class WebhookDelivery(models.Model):
    """Webhook ids already applied: delivery is at least once, so a repeat is acknowledged and ignored."""

    webhook_id = models.CharField(max_length=100, unique=True)
    received_at = models.DateTimeField(auto_now_add=True)
