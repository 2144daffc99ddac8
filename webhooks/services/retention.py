"""Webhook history that leaves the database after its retention window.

The sweeper picks the events past the window with nothing still owed
(sweeper/retention.py); an event goes with its deliveries and their attempts.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from ..models import WebhookEvent


def webhook_events_purge(pks: Collection[Any]) -> None:
    WebhookEvent.objects.filter(pk__in=pks).delete()
