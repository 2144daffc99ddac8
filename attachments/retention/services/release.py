"""The end of a committed file's life: release (by ref or ids), delete one file, restore within the grace.

A released file stays stored and counted for AIRLOCK_LIFECYCLE_SECONDS.release_grace
(its `expires_at`), is never served, and may be restored by its owner or a
moderator of its tenant until then; after that the sweeper removes its objects
under its brakes (killswitch, dry run, lock), as for a discarded file.

Who may act: the owner on their own files; a member holding
`attachments.moderate_attachment` on their tenant's files. Anything else is
a 404, never a hint that the file exists. Rows are locked in primary-key
order, after the owner's slot lock when a commit replaces a set (see
single_slot.lock_owner), like every other lifecycle change.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import PermissionsMixin
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from ...errors import AttachmentInvalid, NotFound, NotRestorable, ValidationFailed
from ...models import Attachment, Lifecycle
from ...services.lifecycle import discard_locked, parse_ids
from ...services.removal import release_locked
from ...services.transitions import lifecycle_audit, user_actor
from ...subjects import confined_subject, owned_q
from .holds import refuse_held

MAX_IDS = 1000


def is_moderator(user: AbstractBaseUser) -> bool:
    return isinstance(user, PermissionsMixin) and user.has_perm("attachments.moderate_attachment")


def actionable_q(user: AbstractBaseUser) -> Q:
    """The files `user` may release, delete or restore: their own, or their tenant's for a moderator."""
    membership = getattr(user, "membership", None)
    subject = confined_subject(user)
    if membership is not None and is_moderator(user):
        return Q(tenant_id=membership.tenant_id) & (Q() if subject is None else Q(subject=subject))
    # An owner is always in their own tenant; the tenant check keeps a moved user to theirs.
    return owned_q(user) if membership is None else owned_q(user) & Q(tenant_id=membership.tenant_id)


def _locked(query: Q) -> list[Attachment]:
    return list(
        Attachment.objects.select_for_update()
        .filter(query)
        .order_by("pk")
        .only("pk", "tenant_id", "owner_id", "subject", "lifecycle", "ref", "expires_at")
    )


def attachments_release(
    *, user: AbstractBaseUser, ref: str | None = None, ids: Sequence[object] | None = None, now: datetime | None = None
) -> list[str]:
    """Release the caller's committed files of `ref`, or the given ids (all or nothing); idempotent.

    Returns every id that is released after the call, including those released before.
    """
    now = now or timezone.now()
    if ref is not None and ids is None:
        return _release_ref(actionable_q(user), ref=ref, now=now, actor=user_actor(user))
    if ids is not None and ref is None:
        return _release_ids(actionable_q(user), ids=ids, now=now, actor=user_actor(user))
    raise ValidationFailed(details={"non_field_errors": ["Give exactly one of ref and ids."]})


def _release_ref(scope: Q, *, ref: str, now: datetime, actor: str) -> list[str]:
    with transaction.atomic():
        rows = _locked(scope & Q(ref=ref, lifecycle__in=(Lifecycle.COMMITTED, Lifecycle.RELEASED)))
        release_locked(rows, now=now, actor=actor, message=f"ref {ref}")
    return [str(a.pk) for a in rows]


def _release_ids(scope: Q, *, ids: Sequence[object], now: datetime, actor: str) -> list[str]:
    if not ids or len(ids) > MAX_IDS:
        raise ValidationFailed(details={"ids": [f"Between 1 and {MAX_IDS} ids."]})
    parsed, bad = parse_ids(ids)
    problems: dict[str, str] = {raw: "not_found" for raw in bad}
    with transaction.atomic():
        rows = _locked(scope & Q(pk__in=parsed))
        by_pk = {a.pk: a for a in rows}
        for pk in parsed:
            row = by_pk.get(pk)
            if row is None or row.lifecycle == Lifecycle.DELETED:
                problems[str(pk)] = "not_found"
            elif row.lifecycle not in (Lifecycle.COMMITTED, Lifecycle.RELEASED):
                problems[str(pk)] = "not_committed"  # staged or discarded: discard or DELETE it instead
        if problems:
            raise AttachmentInvalid(details=problems)
        release_locked(rows, now=now, actor=actor)
    return [str(pk) for pk in dict.fromkeys(parsed)]


def attachment_delete(*, user: AbstractBaseUser, attachment_id: object, now: datetime | None = None) -> str:
    """Let one file go: a staged one is discarded, a committed one released; idempotent. Returns its lifecycle."""
    now = now or timezone.now()
    parsed, _bad = parse_ids([attachment_id])
    with transaction.atomic():
        row = next(iter(_locked(actionable_q(user) & Q(pk__in=parsed))), None)
        if row is None or row.lifecycle == Lifecycle.DELETED:
            raise NotFound()
        if row.lifecycle == Lifecycle.STAGED:
            full = Attachment.objects.select_for_update().get(pk=row.pk)  # locked already: the columns discard reads
            discard_locked(full, now=now, actor=user_actor(user))
            return Lifecycle.DISCARDED
        release_locked([row], now=now, actor=user_actor(user))
        # discarded stays discarded, released keeps its first grace: deleting twice changes nothing
        return Lifecycle.RELEASED if row.lifecycle == Lifecycle.COMMITTED else row.lifecycle


def attachment_restore(
    *, user: AbstractBaseUser, attachment_id: object, now: datetime | None = None, actor: str | None = None
) -> None:
    """Bring a released file back to committed (same ref) while its grace lasts.

    `actor` is who asked (default the user; a staff member restoring from the admin acts as the owner).
    """
    now = now or timezone.now()
    parsed, _bad = parse_ids([attachment_id])
    with transaction.atomic():
        row = next(iter(_locked(actionable_q(user) & Q(pk__in=parsed))), None)
        if row is None:
            raise NotFound()
        if row.lifecycle == Lifecycle.COMMITTED:
            return  # restoring twice is fine
        if row.lifecycle != Lifecycle.RELEASED:
            raise NotRestorable(f"Only a released file can be restored; this one is {row.lifecycle}.")
        if row.expires_at is None or row.expires_at <= now:
            raise NotRestorable("The release grace is over: the file is being removed.")
        # A hold freezes the file as it was when held, released included, until platform staff clear it.
        refuse_held([row.pk], what="restored until the hold is cleared")
        Attachment.objects.filter(pk=row.pk).update(
            lifecycle=Lifecycle.COMMITTED, released_at=None, expires_at=None, updated_at=now
        )
        lifecycle_audit(
            [(row.pk, Lifecycle.RELEASED)],
            event="restore",
            to=Lifecycle.COMMITTED,
            actor=actor or user_actor(user),
            message=f"ref {row.ref}",
        )
