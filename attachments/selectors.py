"""Reads that encode a rule: who may see what, and what may be served."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Collection
from datetime import datetime, timedelta

from django.db.models import Q, QuerySet
from django.utils import timezone

from . import renditions
from .errors import NotFound, NotReady, SignatureInvalid
from .models import Approval, Attachment, Derivative, Lifecycle, RefHold, Status, Tenant
from .signing import archive_check, delivery_check
from .subjects import confined_subject, may_act_on, owned_q
from .tenancy import tenant_of

# Statuses on the way to `ready`: their owner is told to wait (409 NOT_READY), never served a byte.
NOT_YET_READY = (Status.PENDING, Status.PROCESSING)


def _parse(attachment_id: object) -> uuid.UUID:
    try:
        return uuid.UUID(str(attachment_id))
    except (ValueError, TypeError, AttributeError):
        raise NotFound() from None


def _gone(attachment: Attachment, now: datetime) -> bool:
    if attachment.lifecycle in (Lifecycle.DISCARDED, Lifecycle.RELEASED, Lifecycle.DELETED):
        return True
    return (
        attachment.lifecycle == Lifecycle.STAGED and attachment.expires_at is not None and attachment.expires_at <= now
    )


def attachment_visible(*, user, attachment_id: object) -> Attachment:
    """The owner sees every state; the same tenant sees ready ones; everyone else gets 404."""
    tenant = tenant_of(user)
    # A bare primary-key get, with tenant and deletion checked on the row: the
    # same answer as filtering on them in SQL, for about half the ORM's work
    # on the hottest read (no extra lookups to build, no ORDER BY from first()).
    try:
        attachment = Attachment.objects.for_resource().get(pk=_parse(attachment_id))
    except Attachment.DoesNotExist:
        raise NotFound() from None
    if attachment.tenant_id != tenant.pk or attachment.lifecycle == Lifecycle.DELETED:
        raise NotFound()
    if may_act_on(user, attachment):
        return attachment
    if confined_subject(user) is not None:
        raise NotFound()  # a request for one subject sees that subject's files, nobody else's
    if _servable_to_tenant(attachment, timezone.now()):
        return attachment
    raise NotFound()


def servable_now(attachment: Attachment, now: datetime | None = None) -> bool:
    """Ready, and neither gone nor deleted: what the serving gate lets a tenant's members read."""
    return _servable_to_tenant(attachment, now or timezone.now())


def _servable_to_tenant(attachment: Attachment, now: datetime) -> bool:
    """What anyone of the attachment's tenant may read: ready, and neither gone nor deleted."""
    return attachment.status == Status.READY and not _gone(attachment, now)


def attachment_owned(*, user, attachment_id: object) -> Attachment:
    attachment = (
        Attachment.objects.filter(owned_q(user), pk=_parse(attachment_id)).exclude(lifecycle=Lifecycle.DELETED).first()
    )
    if attachment is None:
        raise NotFound()
    return attachment


def can_read_file(*, user, attachment: Attachment, now: datetime | None = None) -> bool:
    """The gating rule of the serving path: a servable file (servable_now), to a member of its tenant.

    The owner is no exception: no byte of a pending or processing file is served
    to anyone, since nothing has checked it yet. A request confined to a subject
    reads only that subject's files.
    """
    if user is None or not _servable_to_tenant(attachment, now or timezone.now()):
        return False
    membership = getattr(user, "membership", None)
    if membership is None or membership.tenant_id != attachment.tenant_id:
        return False
    return confined_subject(user) is None or may_act_on(user, attachment)


# A guest's file waiting for its host's approval (or declined) is delivered full-size to its guest
# only. Previews (thumbnail, poster, the small variants) stay readable to the tenant as usual, so the
# host decides from a grid of them.
_UNAPPROVED = (Approval.PENDING, Approval.DECLINED)
_PREVIEW_READS = ("thumbnail", "poster", "variant-")


def preview_read(name: str) -> bool:
    """Whether reading `name` (a rendition, or a variant's signed name) is a preview: readable while unapproved."""
    return name.startswith(_PREVIEW_READS)


def full_size_refused(*, user, attachment: Attachment) -> bool:
    """Whether the file waits for approval (or was declined) and the caller is not its guest.

    Then its full-size reads (`download`, `display`, `web`) are refused to the
    caller, its previews are not. From the row alone: no query.
    """
    if attachment.approval not in _UNAPPROVED:
        return False
    subject = confined_subject(user) if user is not None else None
    return subject is None or not may_act_on(user, attachment)


def guest_of_unapproved(attachment: Attachment) -> str:
    """The guest a file waiting for approval (or declined) belongs to, whose links read it full size; else ""."""
    return (attachment.subject or "") if attachment.approval in _UNAPPROVED else ""


def unapproved_read_refused(*, user, attachment: Attachment, name: str) -> bool:
    """Whether this read of `name` is refused because the file waits for approval and the caller is not its guest."""
    return not preview_read(name) and full_size_refused(user=user, attachment=attachment)


def attachment_for_download(*, user, attachment_id: object) -> Attachment:
    """The attachment whose bytes this user may read now; NotReady to its owner while it is being checked."""
    attachment = attachment_visible(user=user, attachment_id=attachment_id)
    now = timezone.now()
    if can_read_file(user=user, attachment=attachment, now=now):
        return attachment
    if attachment.status in NOT_YET_READY and not _gone(attachment, now) and may_act_on(user, attachment):
        raise NotReady(details={"status": attachment.status})
    raise NotFound()  # rejected, failed, discarded, released, expired: as if it did not exist


def attachment_for_signed_read(
    *, attachment_id: object, name: str, exp: object, kid: object, sig: object, now: datetime | None = None
) -> tuple[Attachment, bool]:
    """The attachment a signed link names, when its signature holds and the file may be served now.

    A valid signature stands for the tenant's read, never for the owner's: it
    serves exactly what the tenant's members may read through their header
    (ready, staged or committed, unexpired), so a takedown, a rescan hit, a
    release or a delete after the link was minted answers 404. An unknown id is
    SIGNATURE_INVALID like any forged link: only a genuine link learns 404.
    """
    now = now or timezone.now()
    try:
        attachment = Attachment.objects.for_resource().get(pk=uuid.UUID(str(attachment_id)))
    except (ValueError, Attachment.DoesNotExist):
        raise SignatureInvalid() from None
    for_guest = delivery_check(
        tenant_id=attachment.tenant_id,
        attachment_id=attachment.pk,
        name=name,
        exp=exp,
        kid=kid,
        sig=sig,
        now=now.timestamp(),
        guest=attachment.subject or "",  # a guest's link minted before approval keeps working after it
    )
    if not _servable_to_tenant(attachment, now):  # deleted, discarded, released: gone
        raise NotFound()
    return attachment, for_guest


def thumbnail_dims(attachment: Attachment) -> dict | None:
    """The thumbnail's size for the resource, or None: from the row when processing recorded it."""
    if attachment.status != Status.READY:
        return None
    meta = attachment.metadata or {}
    if "thumbnail" in meta:
        return meta["thumbnail"]
    thumbnail = thumbnail_of(attachment)  # rows processed before the size was recorded
    return None if thumbnail is None else {"width": thumbnail.width, "height": thumbnail.height}


def thumbnail_of(attachment: Attachment) -> Derivative | None:
    return derivative_of(attachment, "thumbnail")


def derivative_of(attachment: Attachment, kind: str) -> Derivative | None:
    """A ready attachment's derivative of this kind (thumbnail, display), or None."""
    if attachment.status != Status.READY:
        return None
    # all(), not filter(): a listing's prefetched derivatives answer without a query.
    return next((d for d in attachment.derivatives.all() if d.kind == kind), None)


def attachments_of_owner(
    *,
    user,
    status: str | None = None,
    profile: str | None = None,
    committed: bool | None = None,
    ref: str | None = None,
    subject: str | None = None,
    include_removed: bool = False,
    before: tuple[datetime, uuid.UUID] | None = None,
    ids: Collection[uuid.UUID] | None = None,
    now: datetime | None = None,
) -> QuerySet[Attachment]:
    """The owner's attachments (its subject's when confined), newest first; `before` continues after a cursor.

    Removed files (discarded, deleted, released past their grace) only with
    `include_removed`: a released file stays listed while it can be restored.
    """
    qs = Attachment.objects.for_resource().filter(owned_q(user))
    if not include_removed:
        qs = qs.exclude(lifecycle__in=(Lifecycle.DISCARDED, Lifecycle.DELETED)).exclude(
            lifecycle=Lifecycle.RELEASED, expires_at__lte=now or timezone.now()
        )
    if subject is not None:
        qs = qs.filter(subject=subject)  # with a confined request's own subject: another one lists nothing
    if ref is not None:
        qs = qs.filter(ref=ref)
    if ids is not None:
        qs = qs.filter(pk__in=ids)
    if status:
        qs = qs.filter(status=status)
    if profile:
        qs = qs.filter(profile=profile)
    if committed is True:
        qs = qs.filter(lifecycle=Lifecycle.COMMITTED)
    elif committed is False:
        qs = qs.exclude(lifecycle=Lifecycle.COMMITTED)
    if before is not None:
        created, pk = before
        qs = qs.filter(Q(created_at__lt=created) | Q(created_at=created, id__lt=pk))
    return qs.order_by("-created_at", "-id")


def ready_files_in_storage(*, now: datetime) -> QuerySet[Attachment]:
    """Ready files whose objects must be in storage: not discarded or deleted, staged or released ones unexpired."""
    return Attachment.objects.filter(
        status=Status.READY,
        lifecycle__in=(Lifecycle.STAGED, Lifecycle.COMMITTED, Lifecycle.RELEASED),
    ).exclude(lifecycle__in=(Lifecycle.STAGED, Lifecycle.RELEASED), expires_at__lte=now)


def is_held(attachment: Attachment) -> bool:
    """Under a legal hold, its own or its ref's (what the resource and the admin show).

    The delete paths never ask this: they test the hold in the query that selects
    what to delete (retention/services/holds.py), so a stale answer here can only be shown.
    """
    if attachment.legal_hold:
        return True
    if not attachment.ref:
        return False
    annotated = getattr(attachment, "ref_held", None)  # the admin's list reads it with the rows
    if annotated is not None:
        return bool(annotated)
    return attachment.ref in active_ref_holds(attachment.tenant_id)


# The refs held in each tenant, per process, for HOLD_CACHE_SECONDS: the resource is the
# hottest read, and an EXISTS subquery per read would double its cost on PostgreSQL.
# Holds are few and rarely change; delete paths never read this cache.
HOLD_CACHE_SECONDS = 5.0
_ref_holds: dict[int, tuple[float, frozenset[str]]] = {}
_ref_holds_lock = threading.Lock()


def active_ref_holds(tenant_id: int) -> frozenset[str]:
    """The refs of the tenant under an active hold (cached in this process for a few seconds)."""
    now = time.monotonic()
    cached = _ref_holds.get(tenant_id)
    if cached is not None and now - cached[0] < HOLD_CACHE_SECONDS:
        return cached[1]
    refs = frozenset(RefHold.objects.filter(tenant_id=tenant_id, cleared_at__isnull=True).values_list("ref", flat=True))
    with _ref_holds_lock:
        _ref_holds[tenant_id] = (now, refs)
    return refs


def forget_ref_holds() -> None:
    """Drop the cache (a hold was set or cleared in this process; tests between cases)."""
    with _ref_holds_lock:
        _ref_holds.clear()


def files_waiting_for_processing(*, older_than_seconds: float, limit: int = 1000) -> int:
    """Files whose bytes arrived over `older_than_seconds` ago and that no worker finished yet (at most `limit`)."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    return (
        Attachment.objects.filter(
            status__in=[Status.PENDING, Status.PROCESSING], uploaded_at__isnull=False, uploaded_at__lt=cutoff
        )
        .exclude(lifecycle__in=[Lifecycle.DISCARDED, Lifecycle.DELETED])
        .values("pk")[:limit]
        .count()
    )


# --- a ref's files, for its archive ---------------------------------------------------------


def ref_files_available(*, tenant_id: int, ref: str, scope: str = "") -> QuerySet[Attachment]:
    """The files of a ref its tenant's members may take home, oldest first.

    Ready, committed to this ref (so neither staged, discarded, released nor deleted:
    no expiry applies). `scope` "<owner id>:<subject>" narrows them to one subject's,
    for a caller confined to it.
    """
    qs = Attachment.objects.filter(tenant_id=tenant_id, ref=ref, status=Status.READY, lifecycle=Lifecycle.COMMITTED)
    if scope:
        owner_id, _, subject = scope.partition(":")
        qs = qs.filter(owner_id=int(owner_id) if owner_id.isdigit() else -1, subject=subject)
    return qs.only("id", "filename", "content_type", "served_key", "size", "created_at").order_by("created_at", "id")


def ref_web_renditions(*, tenant_id: int, ref: str, scope: str = "") -> dict[uuid.UUID, tuple[str, int]]:
    """attachment id → (key, size) of each ready web rendition among the ref's available files (one query).

    Ready as the resource shows it (`renditions.web.status`), with its stored object:
    what `web` serves. A file that is no longer available has none here.
    """
    rows = Derivative.objects.filter(
        kind=renditions.DERIVATIVE_KIND,
        attachment__in=ref_files_available(tenant_id=tenant_id, ref=ref, scope=scope).values("pk"),
        attachment__metadata__renditions__web__status=renditions.READY,
    ).values_list("attachment_id", "storage_key", "size")
    return {attachment_id: (key, size) for attachment_id, key, size in rows}


def archive_scope(user) -> str:
    """The part of a ref this caller may take: "" (the tenant's whole ref), or its subject's files."""
    subject = confined_subject(user)
    return "" if subject is None else f"{user.pk}:{subject}"


def ref_archive_files(*, user, ref: str) -> tuple[Tenant, str, list[Attachment]]:
    """(tenant, scope, files) of the ref's archive for a signed-in member; NotFound when it has none."""
    tenant = tenant_of(user)
    scope = archive_scope(user)
    files = list(ref_files_available(tenant_id=tenant.pk, ref=ref, scope=scope))
    if not files:
        raise NotFound()
    return tenant, scope, files


def ref_archive_files_signed(
    *, tenant_slug: object, ref: str, scope: object, exp: object, kid: object, sig: object
) -> tuple[Tenant, str, list[Attachment]]:
    """The same, for a signed archive link: SignatureInvalid/UrlExpired unless it holds, NotFound when empty."""
    scope = scope if isinstance(scope, str) else ""
    tenant = Tenant.objects.filter(slug=tenant_slug).first() if isinstance(tenant_slug, str) else None
    if tenant is None:
        raise SignatureInvalid()
    archive_check(tenant_id=tenant.pk, ref=ref, scope=scope, exp=exp, kid=kid, sig=sig)
    files = list(ref_files_available(tenant_id=tenant.pk, ref=ref, scope=scope))
    if not files:
        raise NotFound()
    return tenant, scope, files
