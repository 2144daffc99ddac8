"""Upload intents: validate the claims, mint the key, write the row, then hand out a URL."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from ...checksums import parse_sha256
from ...client_tokens.services.client_grants import (
    client_token_check_profile,
    client_token_give_back,
    client_token_reserve,
)
from ...declared_types import declared_type_refused, stored_type
from ...errors import TooLarge, TypeNotAllowed
from ...links.services.link_grants import approval_at_intent, link_grant_give_back, link_grant_reserve, link_of_grant
from ...models import Attachment
from ...naming import clean_filename, original_key
from ...profiles import Profile, get_profile
from ...services.audit import INTENT, audit_entry
from ...services.backlog import refuse_when_behind
from ...services.connections import give_connection_back
from ...services.hard_delete import attachments_hard_delete
from ...services.quotas import quota_reserve, usage_release
from ...services.ratelimits import check_intent_rate, limit_th_outstanding, refuse_at_pending_cap
from ...services.transitions import user_actor
from ...signing import upload_token
from ...storage import get_gateway
from ...storage.base import UploadInstruction
from ...subjects import client_token_of, subject_of
from ...tenancy import tenant_of
from .fastpath_insert import attachment_insert_reserving


@dataclass(frozen=True)
class Intent:
    attachment: Attachment
    upload: UploadInstruction | None  # None: the caller sends the bytes another way (tus)
    upload_expires_at: datetime


def validate_claims(*, profile_name: object, content_type: str, size: int, filename: str = "") -> Profile:
    """Check what can be checked before the bytes: the profile, a declared type that rules the file out, the size.

    An empty, generic or misnamed type is no refusal (attachments/declared_types.py): the
    bytes decide at intake. The size is held to the limit of the kind the declared type
    names, or to the profile's largest when it names none; intake holds it to the kind the
    bytes turn out to be.
    """
    profile = get_profile(profile_name)
    if declared_type_refused(profile, content_type=content_type, filename=filename):
        raise TypeNotAllowed(
            f"{content_type!r} is not allowed for profile {profile.name!r}.",
            details={"content_type": [f"Allowed: {', '.join(profile.allowed_types)}."]},
        )
    limit = profile.for_type(content_type).max_bytes
    if size > limit:
        raise TooLarge(
            f"Declared size {size} is over the {profile.name!r} limit of {limit} bytes.",
            details={"size": [f"At most {limit} bytes."], "max_bytes": limit},
        )
    return profile


def create_pending_row(
    *, user, profile: Profile, filename: str, size: int, content_type: str, now: datetime, sha256: str = ""
) -> Attachment:
    """Reserve the declared size in the tenant's quota and insert the pending row, in one transaction.

    Every way of creating an upload (intent, upload-through, tus) comes here,
    so none can pass the quota or the subject's cap on outstanding uploads.
    """
    grant = client_token_of(user)
    if grant is not None:
        # A token's budget is a transaction of several statements anyway: the cap is read
        # first, so it is the answer before the token's own limits, as on every path.
        refuse_at_pending_cap(tenant_id=tenant_of(user).pk, subject=subject_of(user), now=now)
        client_token_check_profile(grant, profile.name)
    link = link_of_grant(grant, now=now)  # a guest's token: the upload link it came from
    tenant = tenant_of(user)
    attachment_id = uuid.uuid4()
    attachment = Attachment(
        id=attachment_id,
        tenant=tenant,
        owner=user,
        subject=subject_of(user),
        profile=profile.name,
        filename=clean_filename(filename),
        declared_size=size,
        declared_type=content_type[:127],
        declared_sha256=sha256,
        storage_key=original_key(tenant_slug=tenant.slug, profile=profile.name, attachment_id=attachment_id),
        created_at=now,
        expires_at=now + timedelta(seconds=settings.AIRLOCK_LIFECYCLE_SECONDS.staged_ttl),
        upload_link=link,
        approval=approval_at_intent(link),
    )
    # The intent's audit entry goes in with the row, in its statement (PostgreSQL) or its transaction.
    entry = audit_entry(
        attachment_id,
        event=INTENT,
        actor=user_actor(user),
        details={
            "profile": profile.name,
            "subject": attachment.subject,
            "declared_size": size,
            "declared_type": content_type[:127],
            "declared_sha256": sha256,
        },
    )
    if grant is None:
        _insert_reserving(attachment, entry, size=size, now=now, cap_read=False)
        return attachment
    with transaction.atomic():  # the token's budget and the row together, or neither
        client_token_reserve(grant, size=size, now=now)
        if link is not None:
            link_grant_reserve(link, subject=attachment.subject, size=size, now=now)
        _insert_reserving(attachment, entry, size=size, now=now, cap_read=True)
    return attachment


def pending_row_refused(*, user, attachment: Attachment) -> None:
    """Undo create_pending_row for an upload refused before its bytes were kept: no row, nothing reserved.

    The row goes for good (a tombstone tells it), and everything its creation
    took is given back in the same transaction: the tenant's (and subject's)
    quota, the client token's budget and, for a guest, the link's and the guest's
    limits. Locks as at the intent: the row (which no intent locks), the token,
    the link, the guest, then the quota. A row already gone gives nothing back.
    """
    with transaction.atomic():
        rows = Attachment.objects.filter(pk=attachment.pk)
        if not rows.select_for_update().exists():
            return
        grant = client_token_of(user)
        if grant is not None:  # what create_pending_row reserved, in its order
            client_token_give_back(grant, size=attachment.declared_size)
            if attachment.upload_link_id is not None:
                link_grant_give_back(
                    link_id=attachment.upload_link_id, subject=attachment.subject, size=attachment.declared_size
                )
        usage_release(rows)
        attachments_hard_delete(rows=rows, actor=user_actor(user), now=timezone.now())


def _insert_reserving(attachment: Attachment, entry, *, size: int, now: datetime, cap_read: bool) -> None:
    """Insert the row and its audit entry, taking room in the tenant's quota, below the subject's pending cap.

    The one statement (PostgreSQL) inserts only when both hold; when it inserts
    nothing, the reads below say which refused, the cap before the quota.
    """
    tenant_id, subject = attachment.tenant.pk, attachment.subject
    limit = settings.AIRLOCK_RATE_LIMITS.pending_per_subject
    at_cap = limit_th_outstanding(tenant_id=tenant_id, subject=subject, now=now, limit=limit) if limit > 0 else None
    if at_cap is not None and attachment_insert_reserving(attachment, entry, unless=at_cap):
        return
    if not cap_read:
        refuse_at_pending_cap(tenant_id=tenant_id, subject=subject, now=now)
    with transaction.atomic():
        quota_reserve(tenant=attachment.tenant, size=size, subject=attachment.subject)
        attachment.save(force_insert=True)
        entry.save()


def upload_intent_create(
    *,
    user,
    profile_name: object,
    filename: str,
    size: int,
    content_type: str,
    now: datetime | None = None,
    presign: bool = True,
    sha256: object = None,
) -> Intent:
    """Create a pending attachment and the single-use URL its bytes go to.

    presign=False: the row only, no URL (a tus upload receives its bytes itself).
    sha256: the client's digest of its bytes (hex or base64), optional; storage
    is asked to check it where it can, and intake always does.
    """
    now = now or timezone.now()
    profile = validate_claims(profile_name=profile_name, content_type=content_type, size=size, filename=filename)
    digest = parse_sha256(sha256)
    refuse_when_behind(tenant_of(user).pk)
    check_intent_rate(user=user, now=now)
    attachment = create_pending_row(
        user=user, profile=profile, filename=filename, size=size, content_type=content_type, now=now, sha256=digest
    )
    expires_in = settings.AIRLOCK_URL_SECONDS.upload
    if not presign:
        return Intent(attachment=attachment, upload=None, upload_expires_at=now + timedelta(seconds=expires_in))
    give_connection_back()  # signing is CPU, a multipart intent a call to storage: no pooled connection held
    upload = get_gateway().presign_upload(
        attachment.storage_key,
        content_type=stored_type(content_type),
        max_bytes=min(size, profile.max_bytes),
        expires_in=expires_in,
        sha256=digest,
    )
    if upload is not None and upload.upload_id:
        # Multipart: the UploadId stays on the server; the complete call needs it.
        Attachment.objects.filter(pk=attachment.pk).update(multipart_upload_id=upload.upload_id)
        attachment.multipart_upload_id = upload.upload_id
    if upload is None:
        url = reverse("upload-content", kwargs={"attachment_id": attachment.id})
        upload = UploadInstruction(
            method="PUT",
            url=f"{url}?token={upload_token(attachment.id)}",
            headers={"Content-Type": stored_type(content_type)},
        )
    return Intent(attachment=attachment, upload=upload, upload_expires_at=now + timedelta(seconds=expires_in))
