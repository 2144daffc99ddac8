"""Logging out discards the user's staged uploads (upload-first lifecycle)."""

from __future__ import annotations

from django.contrib.auth.signals import user_logged_out
from django.dispatch import receiver


@receiver(user_logged_out)
def discard_staged_on_logout(sender, request, user, **kwargs) -> None:
    if user is None:
        return
    from .services.lifecycle import attachments_discard_all

    attachments_discard_all(user=user)
