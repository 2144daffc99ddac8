"""Client tokens: what a host grants one of its people's devices, minted, checked, spent and revoked.

A host mints a client token with its service token for one subject; the device
then talks to Airlock itself, as the minting account confined to that subject
(attachments/subjects.py), within the grant: the profiles it may upload to, the
one ref it may commit to, and a budget of files and declared bytes. Keys start
with `act_` so authentication knows which table to look in; only their SHA-256
is stored, as for API tokens.

The budget counts uploads created with the token (intents, tus creations,
uploads through the API), never given back: a discarded file does not refund
it. It is taken with one conditional UPDATE in the transaction that inserts
the pending row, so concurrent intents cannot pass it.
"""

from __future__ import annotations

import copy
import secrets
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from ...errors import LinkGone, NotFound, ValidationFailed
from ...models import ClientToken, UploadLink
from ...profiles import all_profiles
from ...services.lifecycle import attachments_discard_all
from ...services.tokens import token_digest
from ...subjects import act_for, parse_subject
from ...tenancy import tenant_of

PREFIX = "act_"
MAX_TTL_SECONDS = 86_400
MAX_REF_LENGTH = 200


@dataclass(frozen=True)
class IssuedClientToken:
    token: ClientToken
    key: str  # shown once, never stored


@dataclass(frozen=True)
class Logout:
    revoked: int
    discarded: int


def is_client_key(key: str) -> bool:
    return key.startswith(PREFIX)


def _checked_grant(
    *, ttl_seconds: object, profiles: object, ref: object, max_files: object, max_bytes: object
) -> dict[str, list[str]]:
    problems: dict[str, list[str]] = {}
    if type(ttl_seconds) is not int or not 1 <= ttl_seconds <= MAX_TTL_SECONDS:
        problems["ttl_seconds"] = [f"An integer from 1 to {MAX_TTL_SECONDS}."]
    if profiles is not None:
        known = all_profiles()
        if not isinstance(profiles, list | tuple) or not profiles or not all(isinstance(p, str) for p in profiles):
            problems["profiles"] = ["A non-empty list of profile names (omit it for every profile)."]
        elif unknown := [p for p in profiles if p not in known]:
            problems["profiles"] = [f"Unknown profile: {', '.join(sorted(set(unknown)))}."]
    if ref is not None and (not isinstance(ref, str) or not ref or len(ref) > MAX_REF_LENGTH):
        problems["ref"] = [f"A non-empty string of at most {MAX_REF_LENGTH} characters."]
    for name, value in (("max_files", max_files), ("max_bytes", max_bytes)):
        if value is not None and (type(value) is not int or not 1 <= value <= 2**62):
            problems[name] = ["A positive integer."]
    return problems


def client_token_issue(
    *,
    user,
    subject: object,
    ttl_seconds: int,
    profiles: Sequence[str] | None = None,
    ref: str | None = None,
    max_files: int | None = None,
    max_bytes: int | None = None,
    now: datetime | None = None,
    upload_link: UploadLink | None = None,
) -> IssuedClientToken:
    """A new client token acting as `user` for `subject` within the grant; its key is returned once.

    `upload_link`: minted for a guest of that link (its intents count against the link's limits).
    """
    now = now or timezone.now()
    subject = parse_subject(subject)
    problems = _checked_grant(
        ttl_seconds=ttl_seconds, profiles=profiles, ref=ref, max_files=max_files, max_bytes=max_bytes
    )
    if problems:
        raise ValidationFailed(details=problems)
    key = PREFIX + secrets.token_urlsafe(24)  # 192 random bits
    token = ClientToken.objects.create(
        digest=token_digest(key),
        prefix=key[:12],
        tenant=tenant_of(user),
        user=user,
        subject=subject,
        profiles=sorted(set(profiles)) if isinstance(profiles, list | tuple) else [],
        ref=ref,
        max_files=max_files,
        max_bytes=max_bytes,
        created_at=now,
        expires_at=now + timedelta(seconds=ttl_seconds),
        upload_link=upload_link,
    )
    return IssuedClientToken(token=token, key=key)


def client_token_find(key: str, *, now: datetime | None = None) -> ClientToken | None:
    """The live token with this key (with its user and tenant), or None: unknown, expired or revoked.

    LINK_GONE for a guest's token whose upload link was disabled or expired.
    """
    try:
        token = ClientToken.objects.select_related("user__membership__tenant").get(digest=token_digest(key))
    except ClientToken.DoesNotExist:
        return None
    now = now or timezone.now()
    if token.revoked_at is not None or token.expires_at <= now:
        if token.upload_link_id is not None and _link_closed(token.upload_link_id, now):
            # A guest's page token dies with its link: say so, so the page can tell its guest why.
            raise LinkGone()
        return None
    return token


def _link_closed(link_id: uuid.UUID, now: datetime) -> bool:
    return UploadLink.objects.filter(Q(disabled_at__isnull=False) | Q(expires_at__lte=now), pk=link_id).exists()


def client_token_revoke(*, user, token_id: object, now: datetime | None = None) -> None:
    """Revoke one of the caller's tenant's client tokens (idempotent); another tenant's is NotFound."""
    try:
        token_id = uuid.UUID(str(token_id))
    except ValueError:
        raise NotFound() from None
    rows = ClientToken.objects.filter(pk=token_id, tenant=tenant_of(user))
    if not rows.filter(revoked_at__isnull=True).update(revoked_at=now or timezone.now()) and not rows.exists():
        raise NotFound()


def client_tokens_revoke_subject(*, tenant, subject: str, now: datetime | None = None) -> int:
    """Revoke every live client token of (tenant, subject); how many were live."""
    now = now or timezone.now()
    return ClientToken.objects.filter(
        tenant=tenant, subject=subject, revoked_at__isnull=True, expires_at__gt=now
    ).update(revoked_at=now)


def subject_logout(*, user, subject: object, now: datetime | None = None) -> Logout:
    """Log one of the host's people out: revoke the subject's client tokens, discard its staged uploads.

    Held drafts stay, as for discard-all. Only `user`'s files of the subject are
    discarded (the host's account that made them).
    """
    subject = parse_subject(subject)
    revoked = client_tokens_revoke_subject(tenant=tenant_of(user), subject=subject, now=now)
    # A copy confined to the subject: the caller's own request stays as it authenticated.
    confined = copy.copy(user)
    act_for(confined, subject=subject)
    return Logout(revoked=revoked, discarded=attachments_discard_all(user=confined, now=now))
