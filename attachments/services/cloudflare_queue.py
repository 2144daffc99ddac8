"""Consume R2 event notifications from a Cloudflare Queue over its HTTP pull-consumer API.

One batch: pull (each message leased for the visibility timeout), apply each
message's record (attachments/services/storage_events.py), then one ack call
that acks every message whose record is durably in and retries, alone and
with a delay, each message that failed. Nothing is acked before it is
applied, so a consumer killed mid-batch loses nothing: its leases expire and
the queue delivers those messages again (applying twice is a duplicate).
Dead-lettering is the queue's: after its ``max_retries`` a message goes to
the dead-letter queue configured on the consumer.
"""

from __future__ import annotations

import base64
import binascii
import collections
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .queue_consumers import queue_consumer_seen
from .storage_event_formats import R2, MalformedEvent, parse_storage_events
from .storage_events import RECORDS, storage_events_record

log = logging.getLogger("airlock.storage_events")

SOURCE = "cloudflare"
MAX_BATCH = 100  # Cloudflare's largest pull batch
MAX_RETRY_DELAY_SECONDS = 12 * 3600  # Cloudflare's longest retry delay


@dataclass(frozen=True)
class QueueRef:
    account_id: str
    queue_id: str

    @classmethod
    def parse(cls, value: str) -> QueueRef:
        account_id, _, queue_id = value.strip().partition("/")
        if not account_id or not queue_id or "/" in queue_id:
            raise ValueError(f"expected ACCOUNT_ID/QUEUE_ID, not {value!r}")
        return cls(account_id, queue_id)

    @property
    def name(self) -> str:
        return f"cloudflare:{self.account_id}/{self.queue_id}"


@dataclass
class PullReport:
    messages: int = 0
    records: int = 0
    acked: int = 0
    retried: int = 0
    left_leased: int = 0  # pulled, not handled before a stop: the lease brings them back
    backlog: int | None = None
    outcomes: collections.Counter = field(default_factory=collections.Counter)

    def add(self, other: PullReport) -> None:
        self.messages += other.messages
        self.records += other.records
        self.acked += other.acked
        self.retried += other.retried
        self.left_leased += other.left_leased
        self.backlog = other.backlog
        self.outcomes.update(other.outcomes)


def cloudflare_client(*, api_token: str, base_url: str | None = None) -> Any:
    """The official SDK's client; `base_url` only for a stand-in of the API."""
    from cloudflare import Cloudflare

    if not api_token:
        raise ValueError("AIRLOCK_CLOUDFLARE_API_TOKEN is not set (a token with Queues read and write)")
    return Cloudflare(api_token=api_token, base_url=base_url, max_retries=2, timeout=30)


def retry_delay(attempts: int, *, base_seconds: int) -> int:
    """Seconds before a failed message is offered again: doubling per attempt, capped."""
    return int(min(MAX_RETRY_DELAY_SECONDS, base_seconds * 2 ** max(0, attempts - 1)))


def cloudflare_consume_batch(
    *,
    client: Any,
    queue: QueueRef,
    batch_size: int = 10,
    visibility_timeout_ms: int = 60_000,
    retry_delay_seconds: int = 10,
    stopping: Callable[[], bool] = lambda: False,
    now: datetime | None = None,
) -> PullReport:
    """Pull one batch, apply each message, ack the applied and retry the failed (one call)."""
    pulled = client.queues.messages.pull(
        queue.queue_id,
        account_id=queue.account_id,
        batch_size=max(1, min(MAX_BATCH, batch_size)),
        visibility_timeout_ms=visibility_timeout_ms,
    )
    messages = list((pulled.messages if pulled else None) or [])
    report = PullReport(messages=len(messages), backlog=_backlog(pulled))
    queue_consumer_seen(name=queue.name, backlog=report.backlog, now=now)
    acks: list[dict[str, str]] = []
    retries: list[dict[str, Any]] = []
    for message in messages:
        if stopping():  # leave the rest leased: the visibility timeout brings them back
            report.left_leased += 1
            continue
        if _apply(message, report):
            acks.append({"lease_id": message.lease_id})
        else:
            attempts = int(message.attempts or 1)
            retries.append(
                {"lease_id": message.lease_id, "delay_seconds": retry_delay(attempts, base_seconds=retry_delay_seconds)}
            )
    if acks or retries:
        client.queues.messages.ack(queue.queue_id, account_id=queue.account_id, acks=acks, retries=retries)
        report.acked, report.retried = len(acks), len(retries)
    return report


def _apply(message: Any, report: PullReport) -> bool:
    """True once the message's record is in (or there is nothing to do); False to retry it."""
    try:
        parsed = parse_storage_events(_body(message.body))
    except (ValueError, RecursionError, MalformedEvent) as exc:
        # Retried until the queue's max_retries moves it to its dead-letter queue, where it can be read.
        RECORDS.labels(R2, "malformed").inc()
        report.outcomes["malformed"] += 1
        log.warning(
            "queue message is not a storage notification",
            extra={"step": "storage_event", "message_id": message.id, "error": str(exc)[:300], "source": SOURCE},
        )
        return False
    if parsed.malformed:
        RECORDS.labels(parsed.shape, "malformed").inc(len(parsed.malformed))
        report.outcomes["malformed"] += len(parsed.malformed)
        log.warning(
            "queue message holds an unreadable record",
            extra={"step": "storage_event", "message_id": message.id, "error": parsed.malformed[0], "source": SOURCE},
        )
        return False
    try:
        applied = storage_events_record(parsed=parsed, source=SOURCE)
    except Exception as exc:  # storage or the database failing: this message alone waits and comes back
        report.outcomes["error"] += 1
        log.warning(
            "queue message not applied; retried",
            extra={
                "step": "storage_event",
                "message_id": message.id,
                "attempts": message.attempts,
                "error": f"{type(exc).__name__}: {exc}"[:300],
                "source": SOURCE,
            },
        )
        return False
    report.records += applied.accepted
    report.outcomes.update(applied.outcomes)
    return True


def _body(body: Any) -> Any:
    """A message body as JSON: R2 publishes JSON; a pull consumer may see it as text or base64."""
    if not isinstance(body, str):
        return body
    try:
        return json.loads(body)
    except ValueError:
        try:
            return json.loads(base64.b64decode(body, validate=True))
        except (ValueError, binascii.Error) as exc:
            raise MalformedEvent("the message body is not JSON") from exc


def _backlog(pulled: Any) -> int | None:
    if pulled is None:
        return None
    count = pulled.message_backlog_count
    if count is None and pulled.metadata is not None and pulled.metadata.metrics is not None:
        count = pulled.metadata.metrics.backlog_count
    return None if count is None else int(count)
