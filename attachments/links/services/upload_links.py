"""Upload links: a host makes one for a ref; each device that opens it becomes a guest that uploads to it.

A link belongs to the service account that made it: guests' files are that
account's, each under the guest's own subject (`guest:<link>:<device>`), so
every per-subject rule (rate limit, pending cap, erasure) holds per device.
The guest page (attachments/links/page.py) opens a guest here and gets a
short-lived client token minted for that subject, confined to the link's
profiles and with no ref (a guest never commits: its files reach the ref by
themselves, link_files.py); the link's limits are taken at each intent
(link_grants.py).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from ...client_tokens.services.client_tokens import client_token_issue
from ...errors import AlreadyCommitted, LinkGone, NotFound, ValidationFailed
from ...models import Attachment, ClientToken, Lifecycle, LinkGuest, UploadLink
from ...profiles import all_profiles
from ...services.ids import parse_ids
from ...services.lifecycle import discard_locked
from ...services.removal import release_locked
from ...subjects import client_token_of, confined_subject
from ...tenancy import tenant_of
from .link_grants import link_grant_give_back, link_is_open

MAX_LIFETIME = timedelta(days=366)
MAX_REF_LENGTH = 200
MAX_TITLE_LENGTH = 200
# A guest page's token lives at most this long; reopening the page mints another for the same device.
GUEST_TOKEN_SECONDS = 12 * 3600
GUEST_PREFIX = "guest:"


def default_link_profiles() -> list[str]:
    """What a link without `profiles` takes: a phone's photos and videos."""
    known = all_profiles()
    if "camera" in known:
        return ["camera"]
    return [name for name in ("image", "media") if name in known]


def link_profiles(link: UploadLink) -> list[str]:
    return list(link.profiles) or default_link_profiles()


def link_state(link: UploadLink, now: datetime) -> str:
    if link.disabled_at is not None:
        return "disabled"
    return "open" if link.expires_at > now else "expired"


def _positive(problems: dict[str, list[str]], name: str, value: object) -> None:
    if value is not None and (type(value) is not int or not 1 <= value <= 2**62):
        problems[name] = ["A positive integer."]


def upload_link_create(
    *,
    user,
    ref: object,
    expires_at: datetime,
    profiles: Sequence[str] | None = None,
    max_files_per_guest: int | None = None,
    max_bytes_per_guest: int | None = None,
    max_files: int | None = None,
    requires_approval: bool = False,
    title: str = "",
    now: datetime | None = None,
) -> UploadLink:
    """A new upload link of `user`'s (a service account) to `ref`, open until `expires_at`."""
    now = now or timezone.now()
    problems: dict[str, list[str]] = {}
    if not isinstance(ref, str) or not ref or len(ref) > MAX_REF_LENGTH:
        problems["ref"] = [f"A non-empty string of at most {MAX_REF_LENGTH} characters."]
    if not now < expires_at <= now + MAX_LIFETIME:
        problems["expires_at"] = [f"In the future, at most {MAX_LIFETIME.days} days from now."]
    if profiles is not None:
        known = all_profiles()
        if not isinstance(profiles, list | tuple) or not profiles or not all(isinstance(p, str) for p in profiles):
            problems["profiles"] = ["A non-empty list of profile names (omit it for photos and videos)."]
        elif unknown := sorted({p for p in profiles if p not in known}):
            problems["profiles"] = [f"Unknown profile: {', '.join(unknown)}."]
    for name, value in (
        ("max_files_per_guest", max_files_per_guest),
        ("max_bytes_per_guest", max_bytes_per_guest),
        ("max_files", max_files),
    ):
        _positive(problems, name, value)
    if not isinstance(title, str) or len(title) > MAX_TITLE_LENGTH:
        problems["title"] = [f"At most {MAX_TITLE_LENGTH} characters."]
    if problems or not isinstance(ref, str):
        raise ValidationFailed(details=problems)
    return UploadLink.objects.create(
        tenant=tenant_of(user),
        user=user,
        ref=ref,
        title=title.strip(),
        profiles=sorted(set(profiles)) if profiles else [],
        requires_approval=bool(requires_approval),
        max_files_per_guest=max_files_per_guest,
        max_bytes_per_guest=max_bytes_per_guest,
        max_files=max_files,
        created_at=now,
        expires_at=expires_at,
    )


def upload_links_of(*, user) -> QuerySet[UploadLink]:
    """The links of the caller's tenant, newest first."""
    return UploadLink.objects.filter(tenant=tenant_of(user)).order_by("-created_at", "pk")


def upload_link_get(*, user, link_id: object) -> UploadLink:
    parsed, _bad = parse_ids([link_id])
    link = upload_links_of(user=user).filter(pk__in=parsed).first()
    if link is None:
        raise NotFound()
    return link


def upload_link_disable(*, user, link_id: object, now: datetime | None = None) -> UploadLink:
    """Close a link of the caller's tenant for good (idempotent): its page says so, its guests' intents are 410."""
    now = now or timezone.now()
    with transaction.atomic():
        link = upload_link_get(user=user, link_id=link_id)
        UploadLink.objects.filter(pk=link.pk, disabled_at__isnull=True).update(disabled_at=now)
        # The guests' tokens end with it: nothing a page holds works after this.
        ClientToken.objects.filter(upload_link=link, revoked_at__isnull=True).update(revoked_at=now)
        link.refresh_from_db(fields=["disabled_at"])
    return link


# --- the guest side ----------------------------------------------------------------------


def link_for_page(link_id: object) -> UploadLink:
    """The link a page is opened for, open or not (the page says which); NotFound for none."""
    parsed, _bad = parse_ids([link_id])
    link = UploadLink.objects.filter(pk__in=parsed).first()
    if link is None:
        raise NotFound()
    return link


def new_device_id() -> str:
    return secrets.token_urlsafe(16)


def guest_subject(link: UploadLink, device_id: str) -> str:
    return f"{GUEST_PREFIX}{link.pk.hex}:{device_id}"


@dataclass(frozen=True)
class GuestSession:
    link: UploadLink
    guest: LinkGuest
    key: str  # the client token the page speaks with (never stored)
    expires_at: datetime


def link_guest_open(*, link: UploadLink, device_id: str, now: datetime | None = None) -> GuestSession:
    """The device's guest of this open link (made on its first visit) and a fresh client token for it."""
    now = now or timezone.now()
    if not link_is_open(link, now):
        raise LinkGone()
    subject = guest_subject(link, device_id)
    guest = LinkGuest.objects.filter(link=link, subject=subject).first()
    if guest is None:
        try:
            with transaction.atomic():
                guest = LinkGuest.objects.create(link=link, subject=subject, created_at=now)
        except IntegrityError:  # the same device's two first requests at once
            guest = LinkGuest.objects.get(link=link, subject=subject)
    ttl = min(GUEST_TOKEN_SECONDS, int((link.expires_at - now).total_seconds()))
    issued = client_token_issue(
        user=link.user,
        subject=subject,
        ttl_seconds=max(ttl, 1),
        profiles=link_profiles(link),
        ref=None,  # a guest never commits: its files reach the ref by themselves
        now=now,
        upload_link=link,
    )
    return GuestSession(link=link, guest=guest, key=issued.key, expires_at=issued.token.expires_at)


def undo_window() -> timedelta:
    return timedelta(hours=settings.AIRLOCK_GUEST_UNDO_HOURS)


def link_guest_remove(*, user, attachment_id: object, now: datetime | None = None) -> str:
    """A guest takes back one of its own files within AIRLOCK_GUEST_UNDO_HOURS; returns its lifecycle after.

    Staged: discarded; committed to the link's ref: released. Either way the
    sweeper removes it, and it stops counting against the guest's and the link's limits.
    """
    now = now or timezone.now()
    grant = client_token_of(user)
    subject = confined_subject(user)
    if grant is None or grant.upload_link_id is None or subject is None:
        raise NotFound()  # only a guest's page removes this way; hosts use DELETE /attachments/{id}
    parsed, _bad = parse_ids([attachment_id])
    with transaction.atomic():
        row = (
            Attachment.objects.select_for_update()
            .filter(Q(owner_id=user.pk, subject=subject, upload_link_id=grant.upload_link_id), pk__in=parsed)
            .exclude(lifecycle=Lifecycle.DELETED)
            .first()
        )
        if row is None:
            raise NotFound()
        if row.lifecycle in (Lifecycle.DISCARDED, Lifecycle.RELEASED):
            return row.lifecycle  # removed already
        if row.created_at < now - undo_window():
            raise AlreadyCommitted(
                "The time to remove this file has passed.", details={"undo_hours": settings.AIRLOCK_GUEST_UNDO_HOURS}
            )
        actor = subject  # guest:<link>:<device>
        if row.lifecycle == Lifecycle.STAGED:
            discard_locked(row, now=now, actor=actor)
        else:
            release_locked([row], now=now, actor=actor, message="removed by its guest")
        link_grant_give_back(link_id=grant.upload_link_id, subject=subject, size=row.declared_size)
        return Lifecycle.DISCARDED if row.lifecycle == Lifecycle.DISCARDED else Lifecycle.RELEASED
