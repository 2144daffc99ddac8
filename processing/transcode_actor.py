"""The transcode actor: receive a video's id (and tenant), run it in one of the tenant's transcode slots."""

from __future__ import annotations

import logging
import uuid

import dramatiq

from attachments import jobs
from attachments.models import DeadLetter
from attachments.retention.services.dead_letters import dead_letter_open

from . import fairness
from .transcode import transcode_one

log = logging.getLogger("airlock.actors")
# The sandbox's wall limit (per minute of video) is the real bound; Dramatiq's is only a backstop.
_TIME_LIMIT_MS = 24 * 3600 * 1000


@dramatiq.actor(
    actor_name=jobs.TRANSCODE.actor_name, queue_name=jobs.TRANSCODE.queue, max_retries=0, time_limit=_TIME_LIMIT_MS
)
def transcode(*args: object) -> None:
    """Drop a ready video's original and make its web rendition; at most N at once per tenant."""
    parsed = _args(args)
    if parsed is None:
        dead_letter_open(
            kind=DeadLetter.Kind.MESSAGE,
            last_error=f"malformed {transcode.actor_name} message",
            payload={"actor": transcode.actor_name, "args": [repr(a)[:200] for a in args]},
        )
        log.warning("malformed message dead-lettered", extra={"step": "transcode", "outcome": "dead_letter"})
        return
    attachment_id, tenant = parsed
    fairness.run_in_slot(
        stage=fairness.TRANSCODE,
        key=tenant,
        job_id=attachment_id,
        args=(attachment_id, tenant),
        run=lambda: transcode_one(attachment_id),
        resend=transcode.send,
    )


def _args(args: tuple) -> tuple[uuid.UUID, str] | None:
    if len(args) != 2:
        return None
    try:
        attachment_id = uuid.UUID(str(args[0]))
    except (ValueError, TypeError, AttributeError):
        return None
    tenant = str(args[1])
    return (attachment_id, tenant) if tenant.isascii() and tenant.isdigit() else None
