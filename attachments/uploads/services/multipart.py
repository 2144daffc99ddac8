"""S3 multipart intents: their parts are aborted when the intent dies, and their part URLs can be re-signed.

Parts of an unfinished multipart upload are stored (and billed) but invisible
to listings, so nothing but AbortMultipartUpload removes them. The upload is
aborted when the intent is discarded (at once, after the commit), when the
sweeper reaps it (expired or discarded) and when a committed intent ends as
never uploaded. Aborts are deletes: under a sweeper brake they wait for the
sweep, which runs when the brakes are off.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ...errors import AirlockError
from ...models import Attachment, Lifecycle, Status
from ...storage import get_gateway
from ...storage.base import MultipartGateway, UploadPart

log = logging.getLogger("airlock.uploads")


class UploadNotInProgress(AirlockError):
    code, status, default_message = ("UPLOAD_NOT_IN_PROGRESS", 409, "This intent has no multipart upload in progress.")


def _brake_on() -> bool:
    from ...brakes import delete_brake

    return bool(delete_brake())


def multipart_abort(*, key: str, upload_id: str, gateway: object | None = None) -> bool:
    """Abort one multipart upload; False when it was already gone. Storage errors propagate."""
    gateway = gateway if isinstance(gateway, MultipartGateway) else get_gateway()
    if not isinstance(gateway, MultipartGateway):
        return False
    return gateway.abort_multipart(key, upload_id=upload_id)


def abort_after_commit(uploads: list[tuple[str, str]]) -> None:
    """Abort these (key, upload_id) once the transaction that killed their intents commits.

    Failures are logged, not raised: the sweeper aborts what is left when it reaps the row.
    """

    def run() -> None:
        if _brake_on():
            return  # the sweep aborts them once the brakes are off
        for key, upload_id in uploads:
            try:
                multipart_abort(key=key, upload_id=upload_id)
            except Exception as exc:  # noqa: BLE001 - the sweep retries it
                log.warning("multipart abort failed", extra={"key": key, "error": str(exc)[:300]})

    if uploads:
        transaction.on_commit(run)


@dataclass(frozen=True)
class PartsPlan:
    parts: tuple[UploadPart, ...]  # still to upload, freshly signed
    uploaded: dict[int, tuple[str, int]]  # part number → (etag, size), already in storage
    part_size: int
    expires_at: datetime


def upload_parts_resign(*, user, attachment_id: object, now: datetime | None = None) -> PartsPlan:
    """New URLs for the parts of the caller's in-progress multipart intent that are not uploaded yet."""
    from ...selectors import attachment_owned

    now = now or timezone.now()
    attachment = attachment_owned(user=user, attachment_id=attachment_id)
    expired = (
        attachment.lifecycle == Lifecycle.STAGED and attachment.expires_at is not None and attachment.expires_at <= now
    )
    if (
        not attachment.multipart_upload_id
        or attachment.status != Status.PENDING
        or expired
        or attachment.lifecycle not in (Lifecycle.STAGED, Lifecycle.COMMITTED)
    ):
        raise UploadNotInProgress()
    gateway = get_gateway()
    if not isinstance(gateway, MultipartGateway):
        raise UploadNotInProgress()
    uploaded = gateway.list_parts(attachment.storage_key, upload_id=attachment.multipart_upload_id)
    if uploaded is None:
        raise UploadNotInProgress("The multipart upload no longer exists (completed or aborted).")
    sizes = gateway.part_sizes(attachment.declared_size)
    remaining = {n: size for n, size in sizes.items() if uploaded.get(n, ("", -1))[1] != size}
    expires_in = settings.AIRLOCK_URL_SECONDS.upload
    parts = gateway.presign_parts(
        attachment.storage_key, upload_id=attachment.multipart_upload_id, sizes=remaining, expires_in=expires_in
    )
    # The never-uploaded rule counts from the last URL handed out, not the first.
    Attachment.objects.filter(pk=attachment.pk).update(updated_at=now)
    return PartsPlan(
        parts=parts,
        uploaded={n: uploaded[n] for n in sizes if n not in remaining},
        part_size=sizes[1],
        expires_at=now + timedelta(seconds=expires_in),
    )
