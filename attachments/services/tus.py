"""Resumable uploads (tus 1.0): an intent whose bytes come in pieces, then the same arrival as a PUT.

Creation goes through `upload_intent_create` (validation, backlog shedding,
rate limits, pending caps: whatever guards an intent guards a tus upload).
Each PATCH appends at the server's offset under a claim (one writer per
upload), records the new offset, and on the last byte the staged bytes become
the object at the minted key and `object_arrived` hands it to intake exactly
like a completed signed PUT. Expired or abandoned transfers are removed by the
sweeper (`tus_uploads_expire`), which honours its brakes.

Nothing may write the object after completion, or the bytes served would not
be the bytes scanned. The claim is a row with a heartbeat, so a writer whose
body stalls can lose it while its request still runs; hence:
- local: whoever changes the staging file also holds its fence (an flock the
  kernel drops with the holder, taken before the claim): a live writer cannot be
  replaced, and it closes its write handle before the file is renamed onto the key;
- S3: parts go to a multipart upload that S3 closes on completion, and the
  object is only ever written from what the claim's holders recorded (the same
  bytes, whoever completes, however late); a writer checks its claim before
  each part and each record, and stops when it lost it.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import tempfile
import time
import uuid
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from ..declared_types import stored_type
from ..errors import AirlockError, AlreadyCommitted, NotFound, TooLarge
from ..models import Attachment, Lifecycle, Status, TusUpload
from ..profiles import all_profiles
from ..storage import StorageError, get_gateway
from ..storage.tus import LocalStaging, S3Staging, StagingBusy, StagingFence, s3_part_size, staging_for
from ..subjects import owned_q
from .connections import give_connection_back
from .intents import upload_intent_create
from .uploads import object_arrived, upload_seal

log = logging.getLogger("airlock.tus")

State = TusUpload.State
CHECKSUMS: dict[str, Callable[[], hashlib._Hash]] = {"sha1": hashlib.sha1, "sha256": hashlib.sha256}
_HEARTBEAT_SECONDS = 2.0


class UploadLocked(AirlockError):
    code, status, default_message = "UPLOAD_LOCKED", 423, "Another request is writing to this upload; retry."


class OffsetMismatch(AirlockError):
    code, status, default_message = "OFFSET_MISMATCH", 409, "Upload-Offset is not the upload's current offset."


class ChecksumMismatch(AirlockError):
    code, status, default_message = "CHECKSUM_MISMATCH", 460, "The chunk does not match its Upload-Checksum."


class UploadExpired(AirlockError):
    code, status, default_message = "UPLOAD_EXPIRED", 410, "This upload expired before it was finished."


def tus_max_size() -> int:
    """Tus-Max-Size: the largest profile limit."""
    return max(p.max_bytes for p in all_profiles().values())


def _lock_stale_after() -> timedelta:
    # A live writer renews its claim at least every time a chunk arrives; a body
    # may pause AIRLOCK_HTTP_BODY_TIMEOUT_SECONDS before the server gives up on it.
    return timedelta(seconds=settings.AIRLOCK_HTTP_BODY_TIMEOUT_SECONDS + 5)


def _expiry(now: datetime) -> datetime:
    return now + timedelta(seconds=settings.AIRLOCK_UPLOAD_URL_SECONDS)


def tus_upload_create(
    *, user, length: int, profile_name: object, filename: str, content_type: str, now: datetime | None = None
) -> TusUpload:
    """Create the intent (as POST /uploads would) and the transfer that will fill it."""
    now = now or timezone.now()
    with transaction.atomic():
        intent = upload_intent_create(
            user=user,
            profile_name=profile_name,
            filename=filename,
            size=length,
            content_type=content_type,
            now=now,
            presign=False,
        )
        upload = TusUpload.objects.create(
            attachment=intent.attachment, length=length, created_at=now, expires_at=intent.upload_expires_at
        )
    upload.attachment = intent.attachment
    if length == 0:  # nothing to wait for
        _complete(upload, token=None)
    return upload


def tus_upload_of(*, user, attachment_id: object, now: datetime | None = None) -> TusUpload:
    """The caller's own upload, or NotFound (someone else's, terminated, discarded) / UploadExpired."""
    now = now or timezone.now()
    try:
        pk = uuid.UUID(str(attachment_id))
    except ValueError:
        raise NotFound() from None
    upload = TusUpload.objects.select_related("attachment").filter(owned_q(user, prefix="attachment__"), pk=pk).first()
    if upload is None or upload.state == State.TERMINATED:
        raise NotFound()
    attachment = upload.attachment
    if attachment.lifecycle in (Lifecycle.DISCARDED, Lifecycle.DELETED):
        raise NotFound()
    if upload.state == State.EXPIRED or (upload.state == State.ACTIVE and upload.expires_at <= now):
        raise UploadExpired()
    return upload


def tus_upload_recover(*, user, attachment_id: object, now: datetime | None = None) -> TusUpload:
    """The upload as HEAD reports it; one whose last byte is in but whose completion was lost is completed now.

    A server that dies between recording the last byte and handing the file to
    intake leaves offset == length: the client (rightly) thinks it is done and
    never sends another PATCH, so the next look at it finishes the job.
    """
    now = now or timezone.now()
    upload = tus_upload_of(user=user, attachment_id=attachment_id, now=now)
    if upload.state != State.ACTIVE or upload.offset != upload.length:
        return upload
    try:
        with _held(upload.pk, now, create=False) as (token, fence):
            upload.refresh_from_db()
            upload.attachment = Attachment.objects.only(
                "status", "uploaded_at", "lifecycle", "storage_key", "declared_type"
            ).get(pk=upload.pk)
            if upload.state == State.ACTIVE and upload.offset == upload.length and _accepting(upload.attachment):
                _complete(upload, token=token, fence=fence)
    except UploadLocked:
        return upload  # a writer is at it
    return upload


def _accepting(attachment: Attachment) -> bool:
    return (
        attachment.status == Status.PENDING
        and attachment.uploaded_at is None
        and attachment.lifecycle in (Lifecycle.STAGED, Lifecycle.COMMITTED)
    )


def _claim(pk: uuid.UUID, now: datetime) -> uuid.UUID:
    token = uuid.uuid4()
    claimed = (
        TusUpload.objects.filter(pk=pk, state=State.ACTIVE)
        .filter(Q(lock_token__isnull=True) | Q(locked_at__lt=now - _lock_stale_after()))
        .update(lock_token=token, locked_at=now)
    )
    if not claimed:
        if TusUpload.objects.filter(pk=pk, state=State.ACTIVE).exists():
            raise UploadLocked(headers={"Retry-After": "1"})
        raise NotFound()
    return token


def _release(pk: uuid.UUID, token: uuid.UUID) -> None:
    TusUpload.objects.filter(pk=pk, lock_token=token).update(lock_token=None, locked_at=None)


def _still_held(pk: uuid.UUID, token: uuid.UUID) -> None:
    """Renew the claim, or UploadLocked when another request took it (stop before writing anything more)."""
    if not TusUpload.objects.filter(pk=pk, lock_token=token, state=State.ACTIVE).update(locked_at=timezone.now()):
        raise UploadLocked(headers={"Retry-After": "1"})


@contextmanager
def _held(pk: uuid.UUID, now: datetime, *, create: bool) -> Iterator[tuple[uuid.UUID, StagingFence | None]]:
    """The right to change an upload's staged bytes: its staging fence (local storage), then its claim.

    The fence comes first: the claim of a writer that still runs can look stale
    (its body stalled), but its fence is held until its process lets go, so it
    is never taken over while it can still write.
    """
    staging = staging_for(get_gateway())
    local = staging if isinstance(staging, LocalStaging) else None
    fence = None
    if local is not None:
        try:
            fence = local.fence(str(pk), create=create)
        except StagingBusy:
            raise UploadLocked(headers={"Retry-After": "1"}) from None
    try:
        try:
            token = _claim(pk, now)
        except NotFound:
            if local is not None and fence is not None and create and local.size(str(pk)) == 0:
                local.discard(fence)  # made by this request for an upload that ended meanwhile
            raise
        try:
            yield token, fence
        finally:
            _release(pk, token)
    finally:
        if fence is not None:
            fence.close()


def _heartbeat(chunks: Iterable[bytes], pk: uuid.UUID, token: uuid.UUID) -> Iterator[bytes]:
    """Pass chunks through, renewing the claim every few seconds; stop if another writer took it."""
    last = time.monotonic()
    for chunk in chunks:
        yield chunk
        if time.monotonic() - last >= _HEARTBEAT_SECONDS:
            last = time.monotonic()
            renewed = TusUpload.objects.filter(pk=pk, lock_token=token).update(locked_at=timezone.now())
            give_connection_back()
            if not renewed:
                raise UploadLocked(headers={"Retry-After": "1"})


def _hasher(checksum: tuple[str, bytes] | None):
    if checksum is None:
        return None
    return CHECKSUMS[checksum[0]]()


def tus_upload_append(
    *,
    user,
    attachment_id: object,
    offset: int,
    chunks: Iterable[bytes],
    content_length: int,
    checksum: tuple[str, bytes] | None = None,
    now: datetime | None = None,
) -> TusUpload:
    """Append one PATCH body at `offset` (the server's offset, else OffsetMismatch); complete on the last byte.

    Without a checksum, bytes received before the client went away are kept (it
    resumes from there); with one, the chunk is kept whole or not at all.
    """
    now = now or timezone.now()
    upload = tus_upload_of(user=user, attachment_id=attachment_id, now=now)
    if upload.state == State.COMPLETE:
        if offset != upload.offset:
            raise OffsetMismatch(details={"offset": upload.offset})
        if content_length:
            raise TooLarge("The upload is already complete.", details={"max_bytes": upload.length})
        return upload
    with _held(upload.pk, now, create=True) as (token, fence):
        upload.refresh_from_db()
        attachment = Attachment.objects.only("status", "uploaded_at", "lifecycle", "storage_key", "declared_type").get(
            pk=upload.pk
        )
        upload.attachment = attachment
        if not _accepting(attachment):
            raise NotFound("This upload is no longer accepted.")
        gateway = get_gateway()
        staging = staging_for(gateway)
        if isinstance(staging, LocalStaging):
            held = staging.size(str(upload.pk))
            if held < upload.offset:  # acknowledged bytes lost (a crash before they reached the disk)
                upload.offset = held
                TusUpload.objects.filter(pk=upload.pk, lock_token=token).update(offset=held)
        if offset != upload.offset:
            raise OffsetMismatch(
                f"Upload-Offset is {offset}, the upload is at {upload.offset}.", details={"offset": upload.offset}
            )
        remaining = upload.length - upload.offset
        if content_length > remaining:
            raise TooLarge(
                f"The chunk is {content_length} bytes; {remaining} remain of the declared Upload-Length.",
                details={"max_bytes": upload.length},
            )
        give_connection_back()
        body = _heartbeat(chunks, upload.pk, token)
        if isinstance(staging, LocalStaging):
            assert fence is not None  # _held fences every local writer
            _append_local(upload, staging, fence, body, checksum, token, now)
        else:
            _append_s3(upload, staging, body, checksum, token, now)
        if upload.offset == upload.length:
            _complete(upload, token=token, fence=fence)
    return upload


def _record(upload: TusUpload, token: uuid.UUID, now: datetime, **fields) -> bool:
    """Save the progress of the claim's holder; the clocks restart (Upload-Expires, never-uploaded).

    False when the claim was lost: nothing is saved, and the caller stops.
    """
    expires = _expiry(timezone.now())
    upload.expires_at = expires
    saved = TusUpload.objects.filter(pk=upload.pk, lock_token=token, state=State.ACTIVE).update(
        offset=upload.offset, expires_at=expires, **fields
    )
    if saved:
        Attachment.objects.filter(pk=upload.pk).update(updated_at=timezone.now())
    return bool(saved)


def _verify(hasher, checksum: tuple[str, bytes] | None) -> bool:
    return hasher is None or checksum is None or hasher.digest() == checksum[1]


def _append_local(
    upload: TusUpload,
    staging: LocalStaging,
    fence: StagingFence,
    body: Iterable[bytes],
    checksum: tuple[str, bytes] | None,
    token: uuid.UUID,
    now: datetime,
) -> None:
    start = upload.offset
    hasher = _hasher(checksum)
    written = 0
    fh = staging.open_at(fence, start)
    try:
        try:
            for chunk in body:
                fh.write(chunk)
                written += len(chunk)
                if hasher is not None:
                    hasher.update(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        except BaseException:
            if hasher is not None:  # a checksummed chunk is all or nothing
                written = 0
            fh.truncate(start + written)
            fh.flush()
            upload.offset = start + written
            _record(upload, token, now)
            raise
        if not _verify(hasher, checksum):
            fh.truncate(start)
            raise ChecksumMismatch()
    finally:
        fh.close()  # before any promotion: no write handle outlives this function
    upload.offset = start + written
    if not _record(upload, token, now):
        raise UploadLocked(headers={"Retry-After": "1"})


def _spooled(body: Iterable[bytes], hasher) -> Generator[bytes, None, None]:
    """Receive the whole checksummed chunk before any of it goes to S3 (parts cannot be taken back)."""
    with tempfile.TemporaryFile() as spool:
        for chunk in body:
            spool.write(chunk)
            hasher.update(chunk)
        yield b""  # the hash is final now: the caller checks it before reading on
        spool.seek(0)
        yield from iter(lambda: spool.read(1 << 20), b"")


def _append_s3(
    upload: TusUpload,
    staging: S3Staging,
    body: Iterable[bytes],
    checksum: tuple[str, bytes] | None,
    token: uuid.UUID,
    now: datetime,
) -> None:
    attachment = upload.attachment
    key = attachment.storage_key
    part_size = s3_part_size(upload.length)
    parts: list[list] = list(upload.parts)
    hasher = _hasher(checksum)
    source: Iterator[bytes] = iter(body)
    if hasher is not None:
        spooled = _spooled(body, hasher)
        next(spooled)  # the whole body is in: verify before anything is sent
        if not _verify(hasher, checksum):
            spooled.close()
            raise ChecksumMismatch()
        source = spooled
    buffer = tempfile.SpooledTemporaryFile(max_size=part_size + 1)
    buffer.write(bytes(upload.tail))

    def flush() -> None:
        nonlocal buffer
        _still_held(upload.pk, token)  # a writer that lost its claim must not replace the new holder's parts
        if not upload.s3_upload_id:
            upload_id = staging.create(key, content_type=stored_type(attachment.declared_type))
            # Recorded at once: an expiry or termination must be able to abort it.
            if not TusUpload.objects.filter(pk=upload.pk, lock_token=token, s3_upload_id="").update(
                s3_upload_id=upload_id
            ):
                staging.abort(key, upload_id=upload_id)
                raise UploadLocked(headers={"Retry-After": "1"})
            upload.s3_upload_id = upload_id
        number = len(parts) + 1
        size = buffer.tell()
        etag = staging.upload_part(key, upload_id=upload.s3_upload_id, number=number, body=buffer, size=size)
        parts.append([number, etag, size])
        buffer.close()
        buffer = tempfile.SpooledTemporaryFile(max_size=part_size + 1)
        upload.parts = parts
        upload.offset = sum(p[2] for p in parts)
        if not _record(upload, token, now, parts=parts, tail=b""):
            raise UploadLocked(headers={"Retry-After": "1"})

    def save_tail() -> None:
        buffer.seek(0)
        tail = buffer.read()
        upload.tail = tail
        upload.offset = sum(p[2] for p in parts) + len(tail)
        if not _record(upload, token, now, tail=tail):
            raise UploadLocked(headers={"Retry-After": "1"})

    try:
        try:
            for chunk in source:
                view = memoryview(chunk)
                while view:
                    room = part_size - buffer.tell()
                    buffer.write(view[:room])
                    view = view[room:]
                    if buffer.tell() >= part_size:
                        flush()
        except BaseException:
            save_tail()  # what arrived stays (tus clients resume from HEAD's offset)
            raise
        save_tail()
    finally:
        buffer.close()


def _complete(upload: TusUpload, *, token: uuid.UUID | None, fence: StagingFence | None = None) -> None:
    """The last byte is in: the staged bytes become the object at the minted key, then intake as for a PUT.

    Only the claim's holder completes, from what was recorded (the row, re-read):
    a request that lost its claim, or whose bytes were never recorded, stops here.
    """
    attachment = upload.attachment
    key = attachment.storage_key
    gateway = get_gateway()
    staging = staging_for(gateway)
    if token is None:  # an empty upload, completed as it is created: nothing was ever staged
        size = gateway.write_chunks(key, [b""], content_type=stored_type(attachment.declared_type))
    else:
        recorded = TusUpload.objects.filter(pk=upload.pk, lock_token=token, state=State.ACTIVE).first()
        if recorded is None or recorded.offset != recorded.length:
            raise UploadLocked(headers={"Retry-After": "1"})
        if isinstance(staging, LocalStaging):
            size = _promote_local(recorded, staging, fence, key, stored_type(attachment.declared_type))
        else:
            size = _assemble_s3(recorded, staging, key, stored_type(attachment.declared_type))
    updated = TusUpload.objects.filter(pk=upload.pk, state=State.ACTIVE)
    if token is not None:
        updated = updated.filter(lock_token=token)
    with transaction.atomic():
        if not updated.update(state=State.COMPLETE, tail=b"", offset=upload.length, staged=False):
            raise UploadLocked(headers={"Retry-After": "1"})
        # The server wrote the key itself (no client was ever given a URL for it) and a
        # complete upload takes no more bytes: intake reads it in place, no snapshot.
        upload_seal(attachment_id=upload.pk)
    upload.state = State.COMPLETE
    upload.offset = upload.length
    upload.tail = b""
    object_arrived(key=key, size=size, source="tus", dedupe_key=f"tus:{key}", event_name="ObjectCreated:Put")
    log.info("tus upload complete", extra={"attachment_id": str(upload.pk), "size": size, "step": "arrival"})


def _promote_local(
    recorded: TusUpload, staging: LocalStaging, fence: StagingFence | None, key: str, content_type: str
) -> int:
    if fence is None:
        raise UploadLocked(headers={"Retry-After": "1"})
    if fence.holds_file():
        return staging.promote(fence, key, content_type=content_type)
    # No staging file: renamed onto the key by a completion whose server died before recording it.
    info = get_gateway().head(key)
    if info is None or info.size != recorded.length:
        raise StorageError(f"the staging file of {key} is gone")
    return info.size


def _assemble_s3(recorded: TusUpload, staging: S3Staging, key: str, content_type: str) -> int:
    length = recorded.length
    assembled = get_gateway().head(key)
    if assembled is not None and assembled.size == length:
        return length  # assembled by an earlier attempt (from the same recorded bytes) that was not recorded
    tail = bytes(recorded.tail)
    if not recorded.s3_upload_id:  # smaller than one part: a plain object
        return staging.write_whole(key, [tail], content_type=content_type)
    parts = list(recorded.parts)
    if tail or not parts:
        etag = staging.upload_part(
            key, upload_id=recorded.s3_upload_id, number=len(parts) + 1, body=io.BytesIO(tail), size=len(tail)
        )
        parts.append([len(parts) + 1, etag, len(tail)])
    if not staging.complete(key, upload_id=recorded.s3_upload_id, parts=parts):
        # Completed by an earlier attempt whose server died before recording it, or aborted.
        info = get_gateway().head(key)
        if info is None or info.size != length:
            raise StorageError(f"multipart upload of {key} is gone")
    return length


def _remove_staged(upload: TusUpload, fence: StagingFence | None) -> None:
    """Delete what a transfer left in storage (a staging file, or the parts of its multipart upload)."""
    staging = staging_for(get_gateway())
    if isinstance(staging, LocalStaging):
        if fence is not None:
            staging.discard(fence)
    elif upload.s3_upload_id:
        staging.abort(upload.attachment.storage_key, upload_id=upload.s3_upload_id)


def _fence_for_removal(upload: TusUpload) -> StagingFence | None:
    """The staging fence, when the transfer has a staging file (UploadLocked while a writer holds it)."""
    staging = staging_for(get_gateway())
    if not isinstance(staging, LocalStaging):
        return None
    try:
        return staging.fence(str(upload.pk), create=False)
    except StagingBusy:
        raise UploadLocked(headers={"Retry-After": "1"}) from None


def _brake() -> str:
    from ..brakes import delete_brake

    return delete_brake()


def _finish_stranded(upload: TusUpload, now: datetime) -> None:
    try:
        with _held(upload.pk, now, create=False) as (token, fence):
            upload.refresh_from_db()
            if upload.state == State.ACTIVE and upload.offset == upload.length:
                _complete(upload, token=token, fence=fence)
    except (UploadLocked, NotFound):
        return
    except Exception as exc:  # noqa: BLE001 - the next sweep or HEAD tries again
        log.warning("tus completion failed", extra={"attachment_id": str(upload.pk), "error": str(exc)[:300]})


def tus_upload_terminate(*, user, attachment_id: object, now: datetime | None = None) -> None:
    """DELETE: stop the transfer, drop its staged bytes and discard the intent (a committed one stays).

    A transfer a live PATCH is writing is 423 (its fence is held), as a claim is.
    """
    now = now or timezone.now()
    upload = tus_upload_of(user=user, attachment_id=attachment_id, now=now)
    from .lifecycle import attachment_discard

    if upload.state == State.COMPLETE:
        attachment_discard(user=user, attachment_id=upload.pk, now=now)  # ALREADY_COMMITTED when committed
        TusUpload.objects.filter(pk=upload.pk).update(state=State.TERMINATED)
        return
    with _held(upload.pk, now, create=False) as (token, fence):
        TusUpload.objects.filter(pk=upload.pk, lock_token=token).update(state=State.TERMINATED, tail=b"")
        try:
            attachment_discard(user=user, attachment_id=upload.pk, now=now)
        except AlreadyCommitted:
            pass  # the host app owns it; with no bytes it ends as never uploaded
        if not _brake():  # under a brake the sweep removes it later (terminated rows are swept too)
            upload.refresh_from_db()
            _remove_staged(upload, fence)
            TusUpload.objects.filter(pk=upload.pk).update(s3_upload_id="", staged=False)


def tus_uploads_expire(*, now: datetime | None = None, dry_run: bool = False, limit: int = 500) -> list[uuid.UUID]:
    """Remove the staged bytes of transfers that expired, or were terminated or discarded; their ids.

    Called by the sweep (which owns the brakes: it does not run under the
    killswitch, and under dry run it only reports). A transfer a writer holds is left alone.
    """
    now = now or timezone.now()
    gone = (
        Q(state=State.ACTIVE, expires_at__lte=now)
        | Q(state=State.ACTIVE, attachment__lifecycle__in=[Lifecycle.DISCARDED, Lifecycle.DELETED])
        | Q(state__in=[State.TERMINATED, State.EXPIRED])
    )
    stale = now - _lock_stale_after()
    candidates = list(
        TusUpload.objects.select_related("attachment")
        .filter(gone, staged=True)
        .filter(Q(lock_token__isnull=True) | Q(locked_at__lt=stale))
        .order_by("expires_at")[:limit]
    )
    done = []
    for upload in candidates:
        if upload.state == State.ACTIVE and upload.offset == upload.length and _accepting(upload.attachment):
            # All its bytes are in (a completion lost to a crash): finish it, never delete it.
            if not dry_run:
                _finish_stranded(upload, now)
            continue
        if dry_run:
            done.append(upload.pk)
            continue
        new_state = State.TERMINATED if upload.state == State.TERMINATED else State.EXPIRED
        try:
            fence = _fence_for_removal(upload)
        except UploadLocked:
            continue  # a writer still runs: its fence outlives its claim
        try:
            claimed = (
                TusUpload.objects.filter(pk=upload.pk, state=upload.state, staged=True)
                .filter(Q(lock_token__isnull=True) | Q(locked_at__lt=stale))
                .update(state=new_state, tail=b"")
            )
            if not claimed:
                continue
            _remove_staged(upload, fence)
        except Exception as exc:  # noqa: BLE001 - the next sweep tries again
            log.warning("tus staging removal failed", extra={"attachment_id": str(upload.pk), "error": str(exc)[:300]})
            continue
        finally:
            if fence is not None:
                fence.close()
        TusUpload.objects.filter(pk=upload.pk).update(s3_upload_id="", staged=False)
        done.append(upload.pk)
    if done:
        log.info("tus uploads expired", extra={"count": len(done), "step": "sweep"})
    return done
