"""Unfinished multipart uploads nobody will complete: listed and aborted (their parts are stored and billed).

An upload is an orphan when it is older than the upload URL lifetime
(AIRLOCK_URL_SECONDS.upload: no client can still be sending parts signed for
it) and no live upload owns it: neither a pending intent that has not
received its bytes (Attachment.multipart_upload_id) nor a tus upload still
staging (TusUpload.s3_upload_id; tus on S3 is multipart behind the scenes and
lives longer than an upload URL). The age also leaves alone the short
multipart copies and writes the pipeline itself makes. An upload storage cannot
date is never aborted. Aborts obey the sweeper's brakes, read per batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from itertools import islice

from django.conf import settings

from attachments.models import Attachment, Lifecycle, Status, TusUpload
from attachments.naming import TENANTS_PREFIX
from attachments.storage.base import MultipartGateway, MultipartUploadInfo

from .missing_objects import Context

BATCH_SIZE = 1000


def _owned(upload_ids: list[str]) -> set[str]:
    """The upload ids a live intent or a staging tus upload holds."""
    intents = Attachment.objects.filter(
        multipart_upload_id__in=upload_ids,
        status=Status.PENDING,
        uploaded_at__isnull=True,
        lifecycle__in=(Lifecycle.STAGED, Lifecycle.COMMITTED),
    ).values_list("multipart_upload_id", flat=True)
    tus = TusUpload.objects.filter(s3_upload_id__in=upload_ids, staged=True, state=TusUpload.State.ACTIVE).values_list(
        "s3_upload_id", flat=True
    )
    return {*intents, *tus} - {None, ""}


def orphan_uploads(
    gateway: MultipartGateway, *, now: datetime, batch_size: int = BATCH_SIZE
) -> Iterator[list[MultipartUploadInfo]]:
    """Batches of the orphan multipart uploads under the upload prefix."""
    cutoff = now - timedelta(seconds=settings.AIRLOCK_URL_SECONDS.upload)
    listing = gateway.list_multipart_uploads(TENANTS_PREFIX)
    while chunk := list(islice(listing, batch_size)):
        old = [u for u in chunk if u.initiated is not None and u.initiated < cutoff]
        owned = _owned([u.upload_id for u in old]) if old else set()
        yield [u for u in old if u.upload_id not in owned]


def abort_orphan_uploads(ctx: Context, *, now: datetime, batch_size: int = BATCH_SIZE) -> None:
    """List and abort the orphan multipart uploads (storage without multipart uploads has none)."""
    gateway = ctx.gateway
    if not isinstance(gateway, MultipartGateway):
        return
    for batch in orphan_uploads(gateway, now=now, batch_size=batch_size):
        if not ctx.keep_going():
            break
        ctx.check_brakes()
        for upload in batch:
            detail = f"upload {upload.upload_id[:60]}, initiated {upload.initiated:%Y-%m-%dT%H:%M:%SZ}"
            if ctx.brake:
                action = "kept" if ctx.brake == "killswitch" else "would_abort"
                ctx.record("orphan_multipart", upload.key, action, None, detail)
                continue
            try:
                aborted = gateway.abort_multipart(upload.key, upload_id=upload.upload_id)
            except Exception as exc:  # noqa: BLE001 - reported, the next run tries again
                ctx.record("orphan_multipart", upload.key, "error", None, f"{detail}: {str(exc)[:200]}")
                continue
            ctx.record("orphan_multipart", upload.key, "aborted" if aborted else "gone", None, detail)
