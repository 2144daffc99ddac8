"""Subjects: the host's own id for the person a file belongs to.

A host application integrates with one service token and has many people.
Each file records the subject it is for: the id the host sends in
`Airlock-Subject` (a service token acting for one of its people), the subject
a client token was minted for, or, for a human account acting as itself, the
account's username. Subject ids are the tenant's namespace: per-person rules
(single slot, discard-all, rate limits, quotas, erasure) key on
(tenant, subject), never on the token.

Authentication records on the request's user whom the request acts for
(`act_for`), so every service that takes `user` scopes by it without another
argument: the subject a new file gets (`subject_of`) and which of the owner's
files a call reaches (`owned_q`). A request confined to a subject (the header,
or a client token) reaches only that subject's files; a service token without
the header reaches all of its own files, whatever their subject.
"""

from __future__ import annotations

from django.db.models import Q

from .errors import ValidationFailed

SUBJECT_META_KEY = "HTTP_AIRLOCK_SUBJECT"
MAX_LENGTH = 128

_CONFINED = "_airlock_subject"
_CLIENT_TOKEN = "_airlock_client_token"


def parse_subject(value: object, *, field: str = "subject") -> str:
    """A valid subject id (1–128 printable ASCII characters, no surrounding space), or VALIDATION_ERROR."""
    if not isinstance(value, str) or not value:
        raise ValidationFailed(
            f"`{field}` must be a non-empty string.", details={field: ["Required: 1 to 128 characters."]}
        )
    if len(value) > MAX_LENGTH:
        raise ValidationFailed(
            f"`{field}` is longer than {MAX_LENGTH} characters.", details={field: [f"At most {MAX_LENGTH} characters."]}
        )
    if not all(" " <= ch <= "~" for ch in value) or value != value.strip():
        raise ValidationFailed(
            f"`{field}` must be printable ASCII without leading or trailing spaces.",
            details={field: ["Printable ASCII (0x20–0x7E), no leading or trailing space."]},
        )
    return value


def act_for(user, *, subject: str | None, client_token=None) -> None:
    """Record on the authenticated user whom this request acts for (None: the account itself, unconfined)."""
    setattr(user, _CONFINED, subject)
    setattr(user, _CLIENT_TOKEN, client_token)


def confined_subject(user) -> str | None:
    """The subject this request is confined to (header or client token), or None."""
    return getattr(user, _CONFINED, None)


def client_token_of(user):
    """The ClientToken this request authenticated with, or None (an API token or a session)."""
    return getattr(user, _CLIENT_TOKEN, None)


def subject_of(user) -> str:
    """The subject a file this request creates belongs to."""
    return confined_subject(user) or user.get_username()


def owned_q(user, *, prefix: str = "") -> Q:
    """The owner's files this request may act on: all of them, or one subject's when confined."""
    q = Q(**{f"{prefix}owner_id": user.pk})
    subject = confined_subject(user)
    if subject is not None:
        q &= Q(**{f"{prefix}subject": subject})
    return q


def may_act_on(user, attachment) -> bool:
    """The row-level form of owned_q, for a row already loaded (its owner_id and subject)."""
    if attachment.owner_id != user.pk:
        return False
    subject = confined_subject(user)
    return subject is None or attachment.subject == subject
