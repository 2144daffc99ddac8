"""What the storage-event queue consumers last reported: their backlog and when they last polled.

Written by the consumer (attachments/services/cloudflare_queue.py), read by
/readyz and /metrics in other processes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from ..models import QueueConsumerState

# A running consumer polls at least every --wait-seconds (20 s by default) or backs off up to
# 60 s on errors: five minutes without a poll means it is gone or stuck.
STALE_SECONDS = 300


def queue_consumers_report(*, now: datetime | None = None) -> list[dict[str, Any]]:
    """Every consumer that reported: name, backlog, seconds since its last poll, running, stale."""
    now = now or timezone.now()
    report = []
    for row in QueueConsumerState.objects.order_by("name"):
        age = max(0.0, (now - row.polled_at).total_seconds())
        running = row.stopped_at is None
        report.append(
            {
                "name": row.name,
                "backlog": row.backlog,
                "polled_seconds_ago": round(age, 1),
                "running": running,
                "stale": running and age > STALE_SECONDS,
            }
        )
    return report


def queue_consumer_seen(*, name: str, backlog: int | None, now: datetime | None = None) -> None:
    """Record the consumer's latest look at its queue (what /readyz and /metrics report)."""
    QueueConsumerState.objects.update_or_create(
        name=name[:200], defaults={"backlog": backlog, "polled_at": now or timezone.now(), "stopped_at": None}
    )


def queue_consumer_stopped(*, name: str, now: datetime | None = None) -> None:
    """A clean stop: /readyz stops expecting polls from it."""
    QueueConsumerState.objects.filter(name=name[:200]).update(stopped_at=now or timezone.now())
