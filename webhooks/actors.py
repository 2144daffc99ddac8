"""The delivery actor: receive a delivery id, make one attempt. Retries are ours (the outbox), not Dramatiq's."""

from __future__ import annotations

import logging

import dramatiq

log = logging.getLogger("airlock.webhooks")

# The request timeout bounds an attempt; the time limit is only a backstop.
@dramatiq.actor(actor_name="webhook_deliver", queue_name="webhooks", max_retries=0, time_limit=5 * 60 * 1000)
def deliver(*args: object) -> None:
    """Deliver one webhook event to one endpoint (an attempt; the next is scheduled on failure)."""
    from .services.delivery import delivery_attempt

    try:
        delivery_id = int(str(args[0])) if len(args) == 1 else None
    except ValueError:
        delivery_id = None
    if delivery_id is None:
        log.warning("malformed webhook message dropped", extra={"step": "webhook", "outcome": "malformed"})
        return
    delivery_attempt(delivery_id)
