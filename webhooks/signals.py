"""An endpoint saved or deleted in this process is seen by its next event at once (others: within the cache time)."""

from __future__ import annotations

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from .models import WebhookEndpoint
from .services.endpoints import forget


@receiver(post_save, sender=WebhookEndpoint)
@receiver(post_delete, sender=WebhookEndpoint)
def endpoint_changed(sender, **kwargs) -> None:
    forget()
