"""Bytes arriving: the local signed PUT, upload-through, and storage notifications.

Whatever the path, an arrival is recorded once in the storage-event inbox and
starts intake through the outbox, in the same transaction.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import DateTimeField, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from ... import jobs
from ...checksums import digest_checked, parse_sha256
from ...declared_types import stored_type
from ...errors import AlreadyUploaded, NotFound, TooLarge, UploadTokenInvalid, ValidationFailed
from ...models import Attachment, Lifecycle, Status, StorageEvent
from ...naming import parse_key
from ...profiles import get_profile
from ...services import outbox
from ...services.backlog import refuse_when_behind
from ...services.connections import give_connection_back
from ...services.ratelimits import check_intent_rate
from ...signing import upload_token_valid
from ...storage import get_gateway
from ...storage.base import CreateOnlyGateway, ObjectExists, StorageError
from ...tenancy import tenant_of
from .intents import create_pending_row, pending_row_refused

log = logging.getLogger("airlock.uploads")


def limited(chunks: Iterable[bytes], limit: int) -> Iterator[bytes]:
    """Pass chunks through until the total passes `limit`, then stop reading."""
    total = 0
    for chunk in chunks:
        total += len(chunk)
        if total > limit:
            raise TooLarge(f"The body is larger than the {limit} bytes allowed.", details={"max_bytes": limit})
        yield chunk


def exactly(chunks: Iterable[bytes], length: int | None) -> Iterator[bytes]:
    """Pass chunks through; at the end, refuse a body shorter than its Content-Length.

    WSGI servers end the body stream quietly when the client goes away, so a cut
    upload would otherwise be stored as complete (and use its URL up).
    """
    total = 0
    for chunk in chunks:
        total += len(chunk)
        yield chunk
    if length is not None and total < length:
        raise ValidationFailed(
            f"The body ended after {total} of its {length} bytes (Content-Length).",
            details={"Content-Length": ["The body is shorter than this."]},
        )


def upload_content_receive(
    *, attachment_id: uuid.UUID, token: object, chunks: Callable[[], Iterable[bytes]], content_length: int | None
) -> Attachment:
    """Store the body of a signed PUT, then treat it like a storage event.

    The row is read once. On storage that can create a key only if it is free
    (CreateOnlyGateway: local), the bytes land first and uploaded_at is written with the arrival, in
    one transaction: of two racing PUTs the first to finish keeps the key and the
    other is refused, and a crash between the bytes landing and that commit
    leaves an object whose row has no uploaded_at, which the reconciler's poll
    of silent uploads finds (processing/recovery.py). Elsewhere the row is
    claimed (uploaded_at) before the body is stored, in a commit of its own.
    """
    if not upload_token_valid(token, attachment_id):
        raise UploadTokenInvalid()
    attachment = Attachment.objects.for_upload().by_pk(attachment_id)
    if attachment is None:
        raise UploadTokenInvalid()
    if attachment.lifecycle not in (Lifecycle.STAGED, Lifecycle.COMMITTED) or attachment.status != Status.PENDING:
        if attachment.uploaded_at is not None:
            raise AlreadyUploaded()
        raise NotFound("This upload is no longer accepted.")
    if attachment.uploaded_at is not None:
        raise AlreadyUploaded()
    limit = min(attachment.declared_size, get_profile(attachment.profile).max_bytes)
    if content_length is not None and content_length > limit:
        raise TooLarge(f"The body is larger than the {limit} bytes allowed.", details={"max_bytes": limit})

    gateway = get_gateway()
    create_only = isinstance(gateway, CreateOnlyGateway)
    if not create_only:
        # Claim the intent first so two concurrent PUTs cannot both write.
        claimed = Attachment.objects.filter(pk=attachment_id, uploaded_at__isnull=True).update(
            uploaded_at=timezone.now()
        )
        if not claimed:
            raise AlreadyUploaded()
    give_connection_back()
    try:
        body = exactly(limited(chunks(), limit), content_length)
        if attachment.declared_sha256:
            body = digest_checked(body, attachment.declared_sha256)
        content_type = stored_type(attachment.declared_type)
        if isinstance(gateway, CreateOnlyGateway):
            size = gateway.create_chunks(attachment.storage_key, body, content_type=content_type)
        else:
            size = gateway.write_chunks(attachment.storage_key, body, content_type=content_type)
    except ObjectExists:
        # Another PUT's bytes hold the key: a racing PUT, or one whose arrival a crash or
        # an outage kept from being recorded. Recording it again is harmless (one event per
        # key) and starts the latter at once rather than at the reconciler's next poll.
        _arrived_locally(attachment, size=None, event_name="ObjectCreated:Put")
        raise AlreadyUploaded() from None
    except BaseException:
        # A refused or broken attempt does not use the URL up.
        if not create_only:
            Attachment.objects.filter(pk=attachment_id).update(uploaded_at=None)
        raise
    arrival = _arrived_locally(attachment, size=size, event_name="ObjectCreated:Put")
    if arrival.outcome == "replay_deleted":
        # The file was taken in since this PUT read the row: these bytes are not it.
        raise AlreadyUploaded()
    # As of the arrival: the answer is 202 (accepted, pending) whatever a worker did since.
    attachment.uploaded_at = arrival.uploaded_at or timezone.now()
    return attachment


def upload_through(
    *,
    user,
    profile_name: object,
    filename: str,
    chunks: Iterable[bytes],
    size_hint: int,
    declared_type: str,
    now: datetime | None = None,
    sha256: object = None,
) -> Attachment:
    """POST /attachments: the API receives the bytes itself (small files)."""
    now = now or timezone.now()
    profile = get_profile(profile_name)
    digest = parse_sha256(sha256)

    limit = min(profile.max_bytes, settings.AIRLOCK_MAX_BYTES.upload_through)
    if size_hint > limit:
        raise TooLarge(f"The file is larger than the {limit} bytes allowed.", details={"max_bytes": limit})
    refuse_when_behind(tenant_of(user).pk)
    check_intent_rate(user=user, now=now)
    with transaction.atomic():
        attachment = create_pending_row(
            user=user,
            profile=profile,
            filename=filename,
            size=size_hint,
            content_type=declared_type or "application/octet-stream",
            now=now,
            sha256=digest,
        )
    gateway = get_gateway()
    body = limited(chunks, limit)
    try:
        gateway.write_chunks(attachment.storage_key, digest_checked(body, digest) if digest else body)
    except BaseException:
        # The refused upload leaves no row, and gives back all it reserved (quota, token, link, guest).
        pending_row_refused(user=user, attachment=attachment)
        gateway.delete(attachment.storage_key)
        raise
    arrival = _arrived_locally(attachment, size=None, event_name="ObjectCreated:Post")
    # The row as committed (pending, bytes in): a worker may have started it since,
    # and the contract's 202 says `pending`, so the row is not read again.
    attachment.uploaded_at = arrival.uploaded_at or timezone.now()
    return attachment


def _arrived_locally(attachment: Attachment, *, size: int | None, event_name: str) -> Arrival:
    # Bytes this process wrote are announced like a storage event, under one dedupe key per
    # object whichever way (PUT or POST) they came.
    return object_arrived(
        key=attachment.storage_key,
        size=size,
        source="local",
        dedupe_key=f"local:{attachment.storage_key}",
        event_name=event_name,
        known=attachment,
    )


def upload_complete(*, attachment: Attachment, parts: list[tuple[int, str]] | None = None) -> Attachment:
    """The client says its bytes are in place: check storage ourselves (idempotent).

    For a multipart intent, `parts` ((part_number, etag) pairs) are assembled
    first; without them the call is only the hint.
    """
    if parts and attachment.multipart_upload_id:
        _complete_multipart(attachment_id=attachment.pk, parts=parts)
        attachment = _reread(attachment)
    if attachment.status == Status.PENDING and attachment.lifecycle in (Lifecycle.STAGED, Lifecycle.COMMITTED):
        give_connection_back()  # no pooled connection waits on storage's answer
        try:
            info = get_gateway().head(attachment.storage_key)
        except StorageError:
            info = None
        if info is not None:
            object_arrived(
                key=attachment.storage_key,
                size=info.size,
                source="complete",
                dedupe_key=f"complete:{attachment.storage_key}:{info.etag}",
                event_name="ObjectCreated:Complete",
                etag=info.etag,
            )
            attachment = _reread(attachment)
    return attachment


def _reread(attachment: Attachment) -> Attachment:
    """The row as it is now, as a new instance.

    Not refresh_from_db(): django-fsm-2 reloads a protected status by switching
    protection off on the field object that every thread shares.
    """
    return Attachment.objects.get(pk=attachment.pk)


def _complete_multipart(*, attachment_id: uuid.UUID, parts: list[tuple[int, str]]) -> None:
    """Assemble an S3 multipart upload once, under the row lock; later calls find nothing to do."""
    from ...services.transitions import lock_attachment
    from ...storage.base import MultipartGateway, PartsInvalid

    with transaction.atomic():
        attachment = lock_attachment(attachment_id)
        if attachment is None or not attachment.multipart_upload_id:
            return
        if attachment.status != Status.PENDING or attachment.lifecycle not in (Lifecycle.STAGED, Lifecycle.COMMITTED):
            return
        gateway = get_gateway()
        if not isinstance(gateway, MultipartGateway):
            raise StorageError(f"storage backend {gateway.name} has no multipart uploads")
        planned = set(gateway.part_sizes(attachment.declared_size))
        given = {number for number, _etag in parts}
        if given != planned:
            # S3 would assemble any ascending subset: a short object, and the upload id spent for good.
            missing, extra = sorted(planned - given), sorted(given - planned)
            raise ValidationFailed(
                "Every part of the upload is needed, and no other.",
                details={"parts": [f"missing {missing}" if missing else f"not of this upload {extra}"]},
            )
        try:
            # False: the upload is gone (an earlier call completed it and its commit
            # was lost, or it was aborted); the HEAD that follows tells which.
            gateway.complete_multipart(attachment.storage_key, upload_id=attachment.multipart_upload_id, parts=parts)
        except PartsInvalid as exc:
            raise ValidationFailed(
                "The parts do not match the uploaded parts.", details={"parts": [str(exc)[:300]]}
            ) from exc
        # Assembled by us: the upload id is spent, so the key is write-once from here on.
        upload_seal(attachment_id=attachment.pk, multipart_upload_id=None)


def upload_seal(*, attachment_id: uuid.UUID, **fields: object) -> None:
    """The server itself wrote the object at the upload key, and no URL a client holds can write it again.

    Intake then reads the key in place (no snapshot copy). Called once the object
    is assembled: S3 CompleteMultipartUpload of a multipart intent, or a tus
    upload's last byte; `fields` are saved with the flag.
    """
    Attachment.objects.filter(pk=attachment_id).update(upload_sealed=True, **fields)


@dataclass(frozen=True)
class Arrival:
    outcome: str  # started | duplicate | unknown_key | replay_deleted | ignored
    attachment_id: uuid.UUID | None = None
    uploaded_at: datetime | None = None  # as written with a "started" arrival through `known`


def object_arrived(
    *,
    key: str,
    size: int | None,
    source: str,
    dedupe_key: str,
    event_name: str,
    bucket: str = "",
    etag: str = "",
    known: Attachment | None = None,
) -> Arrival:
    """Record an object-created notification once and start intake for its intent.

    `etag` with `size`, when one look at the object gave both, are kept on the row:
    intake's snapshot copy with that ETag takes that size without a HEAD.

    `known`: the row of this key, already read by the caller (its pk, tenant and
    subject): the arrival then starts with one conditional UPDATE that takes the
    row's lock and writes uploaded_at, instead of a locking read and that UPDATE;
    a row no longer waiting for its bytes falls back to the full ladder.
    """
    try:
        with transaction.atomic():
            if known is not None:
                arrival = _known_arrival(
                    known,
                    key=key,
                    size=size,
                    source=source,
                    dedupe_key=dedupe_key,
                    event_name=event_name,
                    bucket=bucket,
                    etag=etag,
                )
                if arrival is not None:
                    return arrival
            # Only what decides the outcome (and the tenant and subject, whose intake slots
            # the job waits for); storage keys are unique, so no ORDER BY either.
            attachment = next(
                iter(
                    Attachment.objects.select_for_update()
                    .only("status", "lifecycle", "content_key", "uploaded_at", "tenant", "subject")
                    .filter(storage_key=key)[:1]
                ),
                None,
            )
            if attachment is None:
                outcome = "unknown_key"
            elif attachment.content_key:
                # The bytes were already taken into a server-only snapshot: this is
                # a replay of the upload URL, never processed, never served.
                outcome = "replay_deleted"
            elif attachment.status != Status.PENDING or attachment.lifecycle in (
                Lifecycle.DISCARDED,
                Lifecycle.DELETED,
            ):
                outcome = "ignored"
            else:
                outcome = "started"
            unauthorized = outcome in ("unknown_key", "replay_deleted")
            # Deleting what no intent authorized is an automated delete: the sweeper's
            # brakes hold it (the event row says which; reconcile lists the object later).
            brake = _delete_brake() if unauthorized else ""
            # The event row is the dedupe: a second copy of it fails here and changes nothing.
            _record_event(
                dedupe_key,
                source,
                event_name,
                bucket,
                key,
                size,
                outcome=f"{outcome}:{brake}" if brake else outcome,
                attachment_id=attachment.pk if attachment else None,
            )
            if unauthorized:
                if brake:
                    log.warning(
                        "kept object with no intent: sweeper brake on",
                        extra={"key": key, "brake": brake, "outcome": outcome},
                    )
                else:
                    transaction.on_commit(lambda: _delete_unauthorized(key))
                return Arrival(outcome, attachment.pk if attachment else None)
            assert attachment is not None  # only an unknown key has no row, and it returned above
            if outcome == "ignored":
                return Arrival("ignored", attachment.pk)
            changed = []
            if attachment.uploaded_at is None:
                attachment.uploaded_at = timezone.now()
                changed.append("uploaded_at")
            if etag and size is not None:
                attachment.arrived_etag, attachment.arrived_size = etag, size
                changed += ["arrived_etag", "arrived_size"]
            if changed:
                attachment.save(update_fields=changed)
            outbox.enqueue(jobs.INTAKE, attachment.pk, attachment.tenant_id, attachment.subject)
            _log_started(attachment.pk, key=key, source=source, size=size)
            return Arrival("started", attachment.pk)
    except IntegrityError:
        return Arrival("duplicate")


def _known_arrival(
    known: Attachment,
    *,
    key: str,
    size: int | None,
    source: str,
    dedupe_key: str,
    event_name: str,
    bucket: str,
    etag: str,
) -> Arrival | None:
    """The "started" arrival of a row the caller read, in three statements; None when the row is not one to start."""
    now = timezone.now()
    looked: dict[str, object] = {"arrived_etag": etag, "arrived_size": size} if etag and size is not None else {}
    # The ladder's "started" condition (object_arrived), as the UPDATE's WHERE: it holds
    # under the row lock the UPDATE takes. An earlier arrival's uploaded_at is kept.
    started = (
        Attachment.objects.filter(pk=known.pk, storage_key=key, status=Status.PENDING, content_key="")
        .exclude(lifecycle__in=(Lifecycle.DISCARDED, Lifecycle.DELETED))
        .update(uploaded_at=Coalesce("uploaded_at", Value(now, output_field=DateTimeField())), **looked)
    )
    if not started:
        return None
    _record_event(dedupe_key, source, event_name, bucket, key, size, outcome="started", attachment_id=known.pk)
    outbox.enqueue(jobs.INTAKE, known.pk, known.tenant_id, known.subject)
    _log_started(known.pk, key=key, source=source, size=size)
    return Arrival("started", known.pk, uploaded_at=now)


def _log_started(attachment_id: uuid.UUID, *, key: str, source: str, size: int | None) -> None:
    log.info(
        "object arrived",
        extra={
            "attachment_id": str(attachment_id),
            "tenant": _key_tenant(key),
            "step": "arrival",
            "outcome": "started",
            "source": source,
            "size": size,
        },
    )


def _key_tenant(key: str) -> str | None:
    parsed = parse_key(key)
    return parsed.tenant_slug if parsed else None


def _delete_brake() -> str:
    from ...brakes import delete_brake

    return delete_brake()


def _delete_unauthorized(key: str) -> None:
    """An object no intent authorized is never processed: remove it."""
    try:
        from ...storage.base import validate_key

        validate_key(key)
        get_gateway().delete(key)
        log.warning("deleted object with no intent", extra={"key": key, "step": "intake", "outcome": "unknown_key"})
    except Exception as exc:  # reconciliation catches it later
        log.warning("could not delete unknown object", extra={"key": key, "error": str(exc)})


def _record_event(
    dedupe_key: str,
    source: str,
    event_name: str,
    bucket: str,
    key: str,
    size: int | None,
    *,
    outcome: str,
    attachment_id: uuid.UUID | None,
) -> None:
    """The arrival's event row, its fields cut to their columns' lengths."""
    StorageEvent.objects.create(
        dedupe_key=dedupe_key[:700],
        source=source,
        event_name=event_name[:64],
        bucket=bucket[:255],
        key=key[:1024],
        size=size,
        outcome=outcome,
        attachment_id=attachment_id,
    )
