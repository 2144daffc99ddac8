"""The wire formats of storage notifications, read into one record type.

Two shapes are understood:

- S3's ``{"Records": [...]}`` document (S3 → SQS, S3 → SNS → SQS with its
  envelope, MinIO's webhook with its ``s3:`` prefixes), plus S3's test event;
- Cloudflare R2's event notification, one message body per event
  (``{"account", "action", "bucket", "object": {"key", "size", "eTag"},
  "eventTime", "copySource"?}``), alone or as a list of bodies (a relay's batch).

Anything else is not a storage notification at all (``MalformedEvent``). Inside
a known shape, a record that cannot be read is ``malformed``, an R2 action this
service does not know is ``unknown``, and an S3 event kind it does not act on
(restore, tagging, replication…) is ``skipped``; each keeps its index in the
document so the answer can speak per record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote_plus

S3 = "s3"
R2 = "r2"
CREATED = "created"
REMOVED = "removed"

_S3_REMOVED_NAMES = ("ObjectRemoved:", "LifecycleExpiration:Delete")
# R2's actions (developers.cloudflare.com/r2/buckets/event-notifications/): the object-create
# and object-delete event types, lifecycle deletions included.
R2_ACTIONS = {
    "PutObject": CREATED,
    "CopyObject": CREATED,
    "CompleteMultipartUpload": CREATED,
    "DeleteObject": REMOVED,
    "LifecycleDeletion": REMOVED,
}

# What happened to an item that is not a record to apply.
SKIPPED = "skipped"
MALFORMED = "malformed"
UNKNOWN = "unknown"


class MalformedEvent(ValueError):
    """The payload is not a storage notification document at all."""


@dataclass(frozen=True)
class EventRecord:
    kind: str  # created | removed
    event_name: str  # "ObjectCreated:Put" (MinIO's "s3:" prefix removed), or R2's action
    bucket: str
    key: str  # decoded
    size: int | None
    dedupe_key: str


@dataclass(frozen=True)
class ParsedItem:
    """One record of the document: a record to apply, or why there is none (`note`)."""

    index: int
    record: EventRecord | None = None
    note: str = ""  # skipped | malformed | unknown
    detail: str = ""  # the action of an unknown record, the error of a malformed one


@dataclass
class ParsedEvents:
    shape: str = S3
    items: list[ParsedItem] = field(default_factory=list)
    test_event: bool = False

    @property
    def records(self) -> list[EventRecord]:
        return [item.record for item in self.items if item.record is not None]

    def _noted(self, note: str) -> list[ParsedItem]:
        return [item for item in self.items if item.note == note]

    @property
    def skipped(self) -> int:
        return len(self._noted(SKIPPED))

    @property
    def unknown(self) -> int:
        return len(self._noted(UNKNOWN))

    @property
    def malformed(self) -> list[str]:
        return [f"record {item.index}: {item.detail}" for item in self._noted(MALFORMED)]

    @property
    def recognized(self) -> bool:
        return bool(self.items or self.test_event)


def parse_storage_events(payload: object) -> ParsedEvents:
    """Read an S3 event document or R2 notification(s) into records; MalformedEvent if it is neither."""
    if isinstance(payload, list):
        if not all(isinstance(body, dict) for body in payload):
            raise MalformedEvent("a list of notifications must hold only R2 message bodies (JSON objects)")
        return _r2_batch(payload)
    if not isinstance(payload, dict):
        raise MalformedEvent("the event document is not a JSON object")
    if payload.get("Type") == "Notification" and isinstance(payload.get("Message"), str):
        try:  # S3 → SNS → SQS wraps the event document in an SNS envelope
            payload = json.loads(payload["Message"])
        except (ValueError, RecursionError) as exc:
            raise MalformedEvent("the SNS message is not JSON") from exc
        if not isinstance(payload, dict):
            raise MalformedEvent("the SNS message is not a JSON object")
    if payload.get("Event") == "s3:TestEvent":
        return ParsedEvents(test_event=True)
    if "Records" in payload:
        return _s3_document(payload["Records"])
    if "action" in payload:
        return _r2_batch([payload])
    raise MalformedEvent("neither an S3 event document (Records) nor an R2 event notification (action)")


# --- S3 -------------------------------------------------------------------------


def _s3_document(records: object) -> ParsedEvents:
    if not isinstance(records, list):
        raise MalformedEvent("Records is not a list")
    parsed = ParsedEvents(shape=S3)
    for index, raw in enumerate(records):
        try:
            record = _s3_record(raw)
        except (KeyError, TypeError, ValueError) as exc:
            parsed.items.append(ParsedItem(index, note=MALFORMED, detail=_error(exc)))
            continue
        parsed.items.append(ParsedItem(index, record) if record else ParsedItem(index, note=SKIPPED))
    return parsed


def _s3_record(raw: Any) -> EventRecord | None:
    name = str(raw["eventName"])
    if name.startswith("s3:"):
        name = name[3:]
    if name.startswith("ObjectCreated:"):
        kind = CREATED
    elif name.startswith(_S3_REMOVED_NAMES):
        kind = REMOVED
    else:
        return None
    s3 = raw["s3"]
    bucket = str(s3["bucket"]["name"])
    obj = s3["object"]
    key = unquote_plus(str(obj["key"]))  # S3 URL-encodes keys in events (quote_plus)
    version = obj.get("versionId") or obj.get("sequencer")
    if not version:
        # eTag identifies the content of a create; a removal has none worth trusting.
        version = (obj.get("eTag") if kind == CREATED else None) or raw.get("eventTime") or ""
    return _record(kind, name, bucket, key, obj.get("size"), f"s3:{bucket}/{key}#{version}#{name}")


# --- R2 -------------------------------------------------------------------------


def _r2_batch(bodies: list[dict]) -> ParsedEvents:
    parsed = ParsedEvents(shape=R2)
    for index, body in enumerate(bodies):
        action = body.get("action")
        if isinstance(action, str) and action not in R2_ACTIONS:
            parsed.items.append(ParsedItem(index, note=UNKNOWN, detail=action[:64]))
            continue
        try:
            record = _r2_record(body)
        except (KeyError, TypeError, ValueError) as exc:
            parsed.items.append(ParsedItem(index, note=MALFORMED, detail=_error(exc)))
            continue
        parsed.items.append(ParsedItem(index, record))
    return parsed


def _r2_record(body: dict) -> EventRecord:
    action = body["action"]
    if not isinstance(action, str):
        raise TypeError("action is not a string")
    obj = body["object"]
    bucket, key = body["bucket"], obj["key"]
    if not isinstance(bucket, str) or not isinstance(key, str):
        raise TypeError("bucket or object.key is not a string")
    kind = R2_ACTIONS[action]
    # R2 sends keys as they are (not URL-encoded) and has no sequencer: the eTag
    # names a create's content; a deletion is told apart by its time.
    version = (obj.get("eTag") if kind == CREATED else None) or body.get("eventTime") or ""
    return _record(kind, action, bucket, key, obj.get("size"), f"r2:{bucket}/{key}#{version}#{action}")


# --- both -----------------------------------------------------------------------


MAX_SIZE = 2**63 - 1


def _record(kind: str, name: str, bucket: str, key: str, raw_size: object, dedupe_key: str) -> EventRecord:
    if not bucket or not key:
        raise ValueError("empty bucket or key")
    if "\x00" in dedupe_key:
        # PostgreSQL text cannot hold NUL; no key we mint contains one either.
        raise ValueError("NUL byte in the event")
    size = raw_size if isinstance(raw_size, int) and not isinstance(raw_size, bool) and raw_size >= 0 else None
    if size is not None and size > MAX_SIZE:
        raise ValueError("object size out of range")  # no store holds it; a bigint column cannot either
    return EventRecord(kind=kind, event_name=name, bucket=bucket, key=key, size=size, dedupe_key=dedupe_key)


def _error(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]
