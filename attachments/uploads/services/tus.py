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
body stalls can lose it while its request still runs; hence a writer holds the
staging's fence before its claim, records progress only while it holds the
claim, and completion writes the object only from what was recorded
(attachments/storage/staging.py: how the local and the S3 staging keep this).
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from ...declared_types import stored_type
from ...errors import AirlockError, AlreadyCommitted, NotFound, TooLarge
from ...models import Attachment, Lifecycle, Status, TusUpload
from ...profiles import all_profiles
from ...retention.services.holds import held_q, refuse_held
from ...services.connections import give_connection_back
from ...storage import get_gateway
from ...storage.staging import Patch, StagingBusy, StagingFence, staging_for
from ...subjects import owned_q
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
    # may pause AIRLOCK_HTTP_LIMITS.body_timeout_seconds before the server gives up on it.
    return timedelta(seconds=settings.AIRLOCK_HTTP_LIMITS.body_timeout_seconds + 5)


def _expiry(now: datetime) -> datetime:
    return now + timedelta(seconds=settings.AIRLOCK_URL_SECONDS.upload)


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
def _held(pk: uuid.UUID, now: datetime, *, create: bool) -> Iterator[tuple[uuid.UUID, StagingFence]]:
    """The right to change an upload's staged bytes: its staging fence, then its claim.

    The fence comes first: the claim of a writer that still runs can look stale
    (its body stalled), but its fence is held until its process lets go, so it
    is never taken over while it can still write.
    """
    staging = staging_for(get_gateway())
    try:
        fence = staging.fence(str(pk), create=create)
    except StagingBusy:
        raise UploadLocked(headers={"Retry-After": "1"}) from None
    try:
        try:
            token = _claim(pk, now)
        except NotFound:
            if create:
                staging.drop_unused(fence)  # made by this request for an upload that ended meanwhile
            raise
        try:
            yield token, fence
        finally:
            _release(pk, token)
    finally:
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


class _Checksum:
    """Upload-Checksum: the digest the chunk must have."""

    def __init__(self, checksum: tuple[str, bytes]) -> None:
        self.hasher = CHECKSUMS[checksum[0]]()
        self.expected = checksum[1]

    def update(self, chunk: bytes) -> None:
        self.hasher.update(chunk)

    def verify(self) -> None:
        if self.hasher.digest() != self.expected:
            raise ChecksumMismatch()


class _Journal:
    """An append's progress, recorded on the transfer's row only while the writer holds its claim."""

    def __init__(self, upload: TusUpload, token: uuid.UUID) -> None:
        self.upload, self.token = upload, token

    def check(self) -> None:
        _still_held(self.upload.pk, self.token)

    def record(self, offset: int, **fields) -> bool:
        moved = offset > self.upload.offset
        self.upload.offset = offset
        for name, value in fields.items():
            setattr(self.upload, name, value)
        return _record(self.upload, self.token, moved=moved, **fields)

    def record_upload_id(self, upload_id: str) -> bool:
        if not TusUpload.objects.filter(pk=self.upload.pk, lock_token=self.token, s3_upload_id="").update(
            s3_upload_id=upload_id
        ):
            return False
        self.upload.s3_upload_id = upload_id
        return True


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
        staging = staging_for(get_gateway())
        kept = staging.kept(str(upload.pk), upload)
        if kept < upload.offset:  # acknowledged bytes lost (a crash before they reached the disk)
            upload.offset = kept
            TusUpload.objects.filter(pk=upload.pk, lock_token=token).update(offset=kept)
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
        try:
            patch = Patch(
                body=_heartbeat(chunks, upload.pk, token),
                checksum=_Checksum(checksum) if checksum is not None else None,
                journal=_Journal(upload, token),
            )
            staging.append(
                upload, fence, patch, key=attachment.storage_key, content_type=stored_type(attachment.declared_type)
            )
        except StagingBusy:
            raise UploadLocked(headers={"Retry-After": "1"}) from None
        if upload.offset == upload.length:
            _complete(upload, token=token, fence=fence)
    return upload


def _record(upload: TusUpload, token: uuid.UUID, *, moved: bool, **fields) -> bool:
    """Save the progress of the claim's holder; when the offset moved, the clocks restart (Upload-Expires,
    never-uploaded): a PATCH that brings no byte keeps nothing alive.

    False when the claim was lost: nothing is saved, and the caller stops.
    """
    if moved:
        upload.expires_at = _expiry(timezone.now())
        fields["expires_at"] = upload.expires_at
    saved = TusUpload.objects.filter(pk=upload.pk, lock_token=token, state=State.ACTIVE).update(
        offset=upload.offset, **fields
    )
    if saved and moved:
        Attachment.objects.filter(pk=upload.pk).update(updated_at=timezone.now())
    return bool(saved)


def _complete(upload: TusUpload, *, token: uuid.UUID | None, fence: StagingFence | None = None) -> None:
    """The last byte is in: the staged bytes become the object at the minted key, then intake as for a PUT.

    Only the claim's holder completes, from what was recorded (the row, re-read):
    a request that lost its claim, or whose bytes were never recorded, stops here.
    """
    attachment = upload.attachment
    key = attachment.storage_key
    gateway = get_gateway()
    if token is None:  # an empty upload, completed as it is created: nothing was ever staged
        size = gateway.write_chunks(key, [b""], content_type=stored_type(attachment.declared_type))
    else:
        recorded = TusUpload.objects.filter(pk=upload.pk, lock_token=token, state=State.ACTIVE).first()
        if recorded is None or recorded.offset != recorded.length or fence is None:
            raise UploadLocked(headers={"Retry-After": "1"})
        size = staging_for(gateway).finish(recorded, fence, key=key, content_type=stored_type(attachment.declared_type))
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


def _remove_staged(upload: TusUpload, fence: StagingFence) -> None:
    """Delete what a transfer left in storage (a staging file, or the parts of its multipart upload)."""
    staging_for(get_gateway()).remove(upload, fence, key=upload.attachment.storage_key)


def _fence_for_removal(upload: TusUpload) -> StagingFence:
    """The staging fence (UploadLocked while a writer holds it)."""
    try:
        return staging_for(get_gateway()).fence(str(upload.pk), create=False)
    except StagingBusy:
        raise UploadLocked(headers={"Retry-After": "1"}) from None


def _brake() -> str:
    from ...brakes import delete_brake

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
    from ...services.lifecycle import attachment_discard

    if upload.state == State.COMPLETE:
        attachment_discard(user=user, attachment_id=upload.pk, now=now)  # ALREADY_COMMITTED when committed
        TusUpload.objects.filter(pk=upload.pk).update(state=State.TERMINATED)
        return
    with _held(upload.pk, now, create=False) as (token, fence):
        # Before the transfer ends: the sweep drops an ended transfer's bytes, and a held file keeps them.
        refuse_held([upload.pk], what="discarded")
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
        .exclude(attachment__in=Attachment.objects.filter(held_q()))  # a held file keeps even a partial upload
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
            fence.close()
        TusUpload.objects.filter(pk=upload.pk).update(s3_upload_id="", staged=False)
        done.append(upload.pk)
    if done:
        log.info("tus uploads expired", extra={"count": len(done), "step": "sweep"})
    return done
