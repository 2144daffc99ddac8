"""The delivery actor: receive a delivery id, make one attempt. Retries are ours (the outbox), not Dramatiq's."""

from __future__ import annotations

import logging

import dramatiq

from attachments.jobs import WEBHOOK_DELIVER

log = logging.getLogger("airlock.webhooks")


# The request timeout bounds an attempt; the time limit is only a backstop.
@dramatiq.actor(
    actor_name=WEBHOOK_DELIVER.actor_name, queue_name=WEBHOOK_DELIVER.queue, max_retries=0, time_limit=5 * 60 * 1000
)
def deliver(*args: object) -> None:
    """Deliver one webhook event to one endpoint (an attempt; the next is scheduled on failure).

    At most AIRLOCK_WEBHOOK_DELIVERY.endpoint_concurrency attempts per endpoint run at once;
    the others wait parked off the queue (processing/fairness.py), so a slow endpoint
    or a flood of events to one endpoint does not hold up the others' deliveries.
    """
    from processing import fairness

    from .services.delivery import delivery_attempt, delivery_endpoint_id

    parsed = _parse(args)
    if parsed is None:
        log.warning("malformed webhook message dropped", extra={"step": "webhook", "outcome": "malformed"})
        return
    delivery_id, endpoint_id = parsed
    if endpoint_id is None:  # sent before the endpoint rode along
        endpoint_id = delivery_endpoint_id(delivery_id)
        if endpoint_id is None:
            return
    fairness.run_in_slot(
        stage=fairness.WEBHOOK,
        key=str(endpoint_id),
        job_id=delivery_id,
        args=(delivery_id, endpoint_id),
        run=lambda: delivery_attempt(delivery_id) or "skipped",
        resend=deliver.send,
    )


def _parse(args: tuple) -> tuple[int, int | None] | None:
    """(delivery id[, endpoint id]) as integers, or None for a malformed message."""
    if len(args) not in (1, 2) or not all(str(a).isascii() and str(a).isdigit() for a in args):
        return None
    return int(str(args[0])), int(str(args[1])) if len(args) == 2 else None
