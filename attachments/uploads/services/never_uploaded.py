"""Committed intents whose bytes never came: they end as rejected/object_missing instead of pending forever.

An intent is committed (the host app saved the form) before or while the
client uploads. If the upload URL has expired (plus a grace period for a
late storage event) and storage has no object, no upload can come any more:
the row becomes rejected with reason object_missing, which the host app sees
in the status. An object that is there after all is left to reconcile's
lost-arrival repair.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from ...models import Attachment, Lifecycle, Status
from ...services.processing import attachment_reject_missing
from ...services.transitions import lock_attachment
from ...storage import get_gateway
from ...storage.base import StorageGateway
from .multipart import abort_after_commit

MESSAGE = "No upload arrived before the upload URL expired."


def never_uploaded(now: datetime):
    cutoff = now - timedelta(
        seconds=settings.AIRLOCK_URL_SECONDS.upload + settings.AIRLOCK_LIFECYCLE_SECONDS.upload_grace
    )
    # updated_at: a commit or a re-signing of part URLs (multipart) restarts the clock.
    return Attachment.objects.filter(
        status=Status.PENDING,
        uploaded_at__isnull=True,
        lifecycle=Lifecycle.COMMITTED,
        created_at__lt=cutoff,
        updated_at__lt=cutoff,
    )


def intents_never_uploaded_reject(
    *, now: datetime, actor: str, gateway: StorageGateway | None = None, limit: int = 500, dry_run: bool = False
) -> list[uuid.UUID]:
    """Reject committed intents whose upload can no longer come; return their ids (dry run: would reject)."""
    gateway = gateway or get_gateway()
    done = []
    for pk, key in never_uploaded(now).order_by("created_at", "pk").values_list("pk", "storage_key")[:limit]:
        if gateway.head(key) is not None:
            continue  # it came after all: reconcile records the lost arrival
        if dry_run:
            done.append(pk)
            continue
        with transaction.atomic():
            attachment = lock_attachment(pk)
            # Re-checked under the lock: an arrival or a discard may have won meanwhile.
            if attachment is None or not never_uploaded(now).filter(pk=pk).exists():
                continue
            attachment_reject_missing(attachment=attachment, actor=actor, message=MESSAGE)
            if attachment.multipart_upload_id:  # its parts can never be assembled now
                abort_after_commit([(attachment.storage_key, attachment.multipart_upload_id)])
            done.append(pk)
    return done
