"""S3 event notifications (webhook or SQS) → the same inbox as every other arrival.

The ladder for an object-created record, in order:

1. another bucket, a key we could never have minted, or a key in our own
   namespaces (derivatives, quarantine: we wrote those) → ignored;
2. storage has no object at the key (HEAD) → ignored: an event is a hint, and
   one that arrives before its object (or is forged) must not end an intent;
3. no intent for the key → the object is deleted (not quarantined: no row
   exists to look at it from, and nobody was authorized to write it), no row;
4. otherwise ``object_arrived``: recorded once in the inbox (a duplicate
   changes nothing) and intake enqueued through the outbox. Intake then
   believes storage, not the event: size from HEAD (over the profile max →
   ``rejected/too_large``, quarantined) and type from the first bytes (not
   allowed → ``rejected/type_not_allowed``, quarantined).

An object-removed record rejects an attachment in flight (``pending`` with
bytes, or ``processing``) with ``object_missing`` — but only if storage
agrees the object is gone, so a removal delivered after a newer create is
harmless.
"""

from __future__ import annotations

import collections
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from prometheus_client import Counter

from ..models import Attachment, DeadLetter, Lifecycle, Status, StorageEvent
from ..naming import QUARANTINE_PREFIX, parse_key
from ..reasons import ReasonCode
from ..retention.services.dead_letters import dead_letter_open
from ..storage import get_gateway
from ..storage.base import StorageError, validate_key
from ..uploads.services.uploads import object_arrived
from .processing import attachment_reject_missing
from .storage_event_formats import MALFORMED, UNKNOWN, EventRecord, MalformedEvent, ParsedEvents, parse_storage_events

log = logging.getLogger("airlock.storage_events")

ACTOR = "storage-events"

# Every record of every document, by shape and what became of it: an unknown R2 action
# or an unreadable record shows here, not only in the log.
RECORDS = Counter(
    "airlock_storage_event_records_total",
    "Storage notification records by wire shape (s3, r2) and outcome (unknown, malformed, error included).",
    ["shape", "outcome"],
)
ERROR = "error"  # the record could not be applied now (storage or database): send it again


@dataclass(frozen=True)
class RecordResult:
    index: int
    outcome: str
    retry: bool = False  # the sender should deliver this record again (a relay: retry, not ack)


@dataclass
class EventsReport:
    accepted: int = 0
    unknown: int = 0
    outcomes: collections.Counter = field(default_factory=collections.Counter)
    results: list[RecordResult] = field(default_factory=list)


def storage_events_record(*, parsed: ParsedEvents, source: str, isolate_failures: bool = False) -> EventsReport:
    """Apply every record once (idempotently); what happened to each, in document order.

    With `isolate_failures`, a record that cannot be applied now (storage or the
    database failing) is answered ``error``/retry and the others still go in; when
    none could be applied the first failure is raised (a dependency outage).
    Without it the failure is raised at once, and the whole document is redelivered.
    """
    report = EventsReport()
    failure: Exception | None = None
    for item in parsed.items:
        if item.record is None:
            outcome = item.note
            if item.note == UNKNOWN:
                report.unknown += 1
                log.warning(
                    "storage event of an unknown action",
                    extra={"step": "storage_event", "action": item.detail, "source": source},
                )
            elif item.note == MALFORMED:
                log.warning(
                    "storage event record unreadable",
                    extra={"step": "storage_event", "error": item.detail, "source": source},
                )
            report.outcomes[outcome] += 1
            report.results.append(RecordResult(item.index, outcome))
            RECORDS.labels(parsed.shape, outcome).inc()
            continue
        record = item.record
        try:
            outcome = _apply(record, source=source)
        except Exception as exc:
            if not isolate_failures:
                raise
            failure = failure or exc
            log.warning(
                "storage event not applied; to be sent again",
                extra={"step": "storage_event", "key": record.key[:200], "error": str(exc)[:300], "source": source},
            )
            report.outcomes[ERROR] += 1
            report.results.append(RecordResult(item.index, ERROR, retry=True))
            RECORDS.labels(parsed.shape, ERROR).inc()
            continue
        report.accepted += 1
        report.outcomes[outcome] += 1
        report.results.append(RecordResult(item.index, outcome))
        RECORDS.labels(parsed.shape, outcome).inc()
        log.info(
            "storage event",
            extra={
                "step": "storage_event",
                "event_name": record.event_name,
                "key": record.key,
                "outcome": outcome,
                "source": source,
            },
        )
    if failure is not None and report.accepted == 0 and report.outcomes[ERROR] == len(report.results):
        raise failure
    if parsed.test_event:
        report.outcomes["test_event"] += 1
    return report


def _apply(record: EventRecord, *, source: str) -> str:
    if record.bucket != (settings.AIRLOCK_S3_BUCKET or None) or settings.AIRLOCK_STORAGE != "s3":
        return "foreign_bucket"  # never act on another bucket's key in ours
    try:
        validate_key(record.key)
    except StorageError:
        log.warning("storage event for a key Airlock never mints", extra={"key": record.key[:200]})
        return "invalid_key"
    if _own_write(record.key):
        return "own_write"
    if record.kind == "created":
        if get_gateway().head(record.key) is None:
            # Nothing there (a forged or early event): ignored, and not recorded, so the
            # real event for the object, whatever its dedupe key, still starts intake.
            return "absent"
        return object_arrived(
            key=record.key,
            size=record.size,
            source=source,
            dedupe_key=record.dedupe_key,
            event_name=record.event_name,
            bucket=record.bucket,
        ).outcome
    return _object_removed(record, source=source)


def _own_write(key: str) -> bool:
    """Keys Airlock writes itself: never subject to the unknown-key ladder (their rows may
    not be committed yet when the event arrives; the reconciler owns their orphans)."""
    if key.startswith(QUARANTINE_PREFIX):
        return True
    parsed = parse_key(key)
    return parsed is not None and bool(parsed.derivative)


def _object_removed(record: EventRecord, *, source: str) -> str:
    """An object of an attachment in flight disappeared: reject it, if storage agrees."""
    try:
        with transaction.atomic():
            event = StorageEvent.objects.create(
                dedupe_key=record.dedupe_key[:700],
                source=source,
                event_name=record.event_name[:64],
                bucket=record.bucket[:255],
                key=record.key[:1024],
                size=record.size,
            )
            attachment = Attachment.objects.select_for_update().filter(storage_key=record.key).first()
            event.attachment = attachment
            event.outcome = _removal_outcome(attachment)
            event.save(update_fields=["attachment", "outcome"])
            return event.outcome
    except IntegrityError:
        return "duplicate"


def _removal_outcome(attachment: Attachment | None) -> str:
    if attachment is None or attachment.lifecycle in (Lifecycle.DISCARDED, Lifecycle.DELETED):
        return "ignored"
    if attachment.content_key:
        return "ignored"  # our own snapshot removed the upload key; the bytes live on
    in_flight = attachment.status == Status.PROCESSING or (
        attachment.status == Status.PENDING and attachment.uploaded_at is not None
    )
    if not in_flight:
        # pending without bytes: the create may still come (and intake checks);
        # ready/rejected/failed: our own moves and deletes end here.
        return "ignored"
    if get_gateway().head(attachment.storage_key) is not None:
        return "still_present"  # out of order: a newer create replaced it
    attachment_reject_missing(
        attachment=attachment, actor=ACTOR, message="The object was removed from storage before processing finished."
    )
    return ReasonCode.OBJECT_MISSING.value  # the event's outcome names what it did to the row


# --- SQS ------------------------------------------------------------------------


@dataclass
class ConsumeReport:
    messages: int = 0
    records: int = 0
    deleted: int = 0
    dead_lettered: int = 0
    left_for_retry: int = 0
    outcomes: collections.Counter = field(default_factory=collections.Counter)

    def add(self, other: ConsumeReport) -> None:
        self.messages += other.messages
        self.records += other.records
        self.deleted += other.deleted
        self.dead_lettered += other.dead_lettered
        self.left_for_retry += other.left_for_retry
        self.outcomes.update(other.outcomes)


def sqs_client(*, region: str | None = None, endpoint_url: str | None = None) -> Any:
    import boto3

    return boto3.client("sqs", region_name=region or settings.AIRLOCK_S3_REGION, endpoint_url=endpoint_url)


def sqs_consume_batch(
    *, client: Any, queue_url: str, wait_seconds: int = 20, max_messages: int = 10, max_receives: int = 5
) -> ConsumeReport:
    """Receive one batch (long poll) and handle each message; delete only what is recorded."""
    response = client.receive_message(
        QueueUrl=queue_url,
        MaxNumberOfMessages=max(1, min(10, max_messages)),
        WaitTimeSeconds=max(0, min(20, wait_seconds)),
        AttributeNames=["ApproximateReceiveCount"],
    )
    report = ConsumeReport()
    for message in response.get("Messages", []):
        report.messages += 1
        _handle_message(client, queue_url, message, report, max_receives=max_receives)
    return report


def _handle_message(client: Any, queue_url: str, message: dict, report: ConsumeReport, *, max_receives: int) -> None:
    body = message.get("Body", "")
    receipt = message["ReceiptHandle"]
    try:
        payload = json.loads(body)
        parsed = parse_storage_events(payload)
    except (ValueError, RecursionError, MalformedEvent) as exc:  # JSONDecodeError is a ValueError
        _dead_letter_and_delete(client, queue_url, message, report, error=f"malformed message: {exc}")
        return
    if not parsed.recognized:
        _dead_letter_and_delete(client, queue_url, message, report, error="not an S3 event document")
        return
    try:
        outcome = storage_events_record(parsed=parsed, source="sqs")
    except Exception as exc:  # DB or storage down: leave it for redelivery, but not forever
        receives = int(message.get("Attributes", {}).get("ApproximateReceiveCount", "1") or 1)
        if receives >= max_receives:
            _dead_letter_and_delete(
                client, queue_url, message, report, error=f"failed {receives} times: {type(exc).__name__}: {exc}"
            )
        else:
            report.left_for_retry += 1
            log.warning(
                "storage event message left for redelivery", extra={"error": str(exc)[:300], "receives": receives}
            )
        return
    report.records += outcome.accepted
    report.outcomes.update(outcome.outcomes)
    if parsed.malformed:  # the good records are in; keep the rest for a human
        _dead_letter(message, error="; ".join(parsed.malformed)[:5000], queue_url=queue_url)
        report.dead_lettered += 1
    client.delete_message(QueueUrl=queue_url, ReceiptHandle=receipt)
    report.deleted += 1


def _dead_letter(message: dict, *, error: str, queue_url: str) -> DeadLetter:
    return dead_letter_open(
        kind=DeadLetter.Kind.MESSAGE,
        last_error=error,
        payload={
            "source": "sqs",
            "queue_url": queue_url,
            "message_id": message.get("MessageId", ""),
            "body": str(message.get("Body", ""))[:100_000],
        },
    )


def _dead_letter_and_delete(client: Any, queue_url: str, message: dict, report: ConsumeReport, *, error: str) -> None:
    _dead_letter(message, error=error, queue_url=queue_url)  # if this raises, the message stays
    client.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    report.dead_lettered += 1
    report.deleted += 1
    log.warning("storage event message dead-lettered", extra={"error": error[:300]})
