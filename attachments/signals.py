"""Signal receivers: logging out discards staged uploads; a new tenant gets its usage counter."""

from __future__ import annotations

from django.contrib.auth.signals import user_logged_out
from django.db.models.signals import post_save
from django.dispatch import receiver


@receiver(user_logged_out)
def discard_staged_on_logout(sender, request, user, **kwargs) -> None:
    if user is None:
        return
    from .services.lifecycle import attachments_discard_all

    attachments_discard_all(user=user)


@receiver(post_save, sender="attachments.Tenant")
def tenant_usage_counter(sender, instance, created, raw=False, **kwargs) -> None:
    """A new tenant starts with its quota counter (attachments/services/quotas.py) at zero."""
    if created and not raw:
        from .services.tenants import tenant_usage_open

        tenant_usage_open(tenant_id=instance.pk)
