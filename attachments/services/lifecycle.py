"""Upload-first lifecycle: the client may heartbeat, discard and commit; the server guarantees."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import models, transaction
from django.db.models import Case, DateTimeField, Q, Value, When
from django.db.models.functions import Coalesce, Least
from django.utils import timezone

from ..client_tokens.services.client_grants import client_token_check_commit
from ..errors import AlreadyCommitted, AttachmentInvalid, NotFound, ValidationFailed
from ..models import Approval, Attachment, Lifecycle, Status
from ..retention.services.holds import not_held_q, refuse_held
from ..subjects import client_token_of, owned_q
from ..uploads.services.multipart import abort_after_commit
from .audit import heartbeat_entries, heartbeats_record
from .duplicates import duplicate_of_update, duplicates_in_ref
from .ids import parse_ids
from .quotas import usage_delta, usage_move, usage_release, usage_snapshot
from .removal import release_locked
from .single_slot import lock_owner, single_slot_settle
from .transitions import lifecycle_audit, user_actor


def is_expired(attachment: Attachment, now: datetime) -> bool:
    return (
        attachment.lifecycle == Lifecycle.STAGED and attachment.expires_at is not None and attachment.expires_at <= now
    )


@dataclass
class HeartbeatResult:
    attachments: list[tuple[str, datetime | None]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


def attachments_heartbeat(
    *, user: AbstractBaseUser, ids: Sequence[object], now: datetime | None = None
) -> HeartbeatResult:
    """Extend staged uploads: never earlier, never past the hard cap.

    One UPDATE for the whole request (clients heartbeat often, with many ids).
    It does not touch `updated_at`: that is the pipeline's "last progress" clock,
    and a draft heartbeated every minute must still have a lost job re-driven.
    """
    now = now or timezone.now()
    window = timedelta(seconds=settings.AIRLOCK_LIFECYCLE_SECONDS.heartbeat_window)
    cap = timedelta(seconds=settings.AIRLOCK_LIFECYCLE_SECONDS.hard_cap)
    parsed, bad = parse_ids(ids)
    result = HeartbeatResult(missing=list(bad))
    with transaction.atomic():
        rows = {
            a.pk: a
            for a in Attachment.objects.select_for_update()
            .filter(owned_q(user), pk__in=parsed)
            .order_by("pk")
            .only("pk", "lifecycle", "expires_at", "created_at")
        }
        extended: dict[uuid.UUID, datetime] = {}
        before: dict[uuid.UUID, datetime | None] = {}
        for attachment_id in parsed:
            attachment = rows.get(attachment_id)
            if (
                attachment is None
                or attachment.lifecycle in (Lifecycle.DISCARDED, Lifecycle.RELEASED, Lifecycle.DELETED)
                or is_expired(attachment, now)
            ):
                result.missing.append(str(attachment_id))
                continue
            if attachment.lifecycle == Lifecycle.COMMITTED:
                result.attachments.append((str(attachment_id), None))
                continue
            target = min(now + window, attachment.created_at + cap)
            if attachment.expires_at is None or target > attachment.expires_at:
                before[attachment.pk] = attachment.expires_at
                attachment.expires_at = extended[attachment.pk] = target
            result.attachments.append((str(attachment_id), attachment.expires_at))
        if extended:
            Attachment.objects.filter(pk__in=list(extended), lifecycle=Lifecycle.STAGED).update(
                expires_at=Case(
                    *(When(pk=pk, then=Value(at)) for pk, at in extended.items()), output_field=DateTimeField()
                ),
            )
            # The request's audit entries, at most one per file and hour gained, each folded into
            # its file's one heartbeat row (a SELECT, a DELETE and one INSERT; none most of the time).
            heartbeats_record(
                heartbeat_entries(((pk, before[pk], at) for pk, at in extended.items()), actor=user_actor(user))
            )
    return result


def attachment_discard(
    *, user: AbstractBaseUser, attachment_id: object, now: datetime | None = None, actor: str | None = None
) -> None:
    """Mark an owned, uncommitted attachment for the sweeper's next tick (idempotent).

    `actor` is who asked (default the owner; a staff member discarding from the admin).
    """
    now = now or timezone.now()
    parsed, _bad = parse_ids([attachment_id])
    with transaction.atomic():
        attachment = (
            Attachment.objects.select_for_update()
            .filter(owned_q(user), pk__in=parsed)
            .exclude(lifecycle=Lifecycle.DELETED)
            .first()
        )
        if attachment is None:
            raise NotFound()
        if attachment.lifecycle == Lifecycle.COMMITTED:
            raise AlreadyCommitted()
        if attachment.lifecycle in (Lifecycle.DISCARDED, Lifecycle.RELEASED):
            return  # already on its way out (a released file keeps its grace)
        discard_locked(attachment, now=now, actor=actor or user_actor(user))


def discard_locked(attachment: Attachment, *, now: datetime, actor: str) -> None:
    """Discard a staged row the caller has locked (read in full): due at once, no longer counted.

    LEGAL_HOLD when it is held (discard, DELETE and the admin's discard all come here).
    """
    refuse_held([attachment.pk], what="discarded")
    if attachment.multipart_upload_id:  # its parts are stored (and billed) until aborted
        abort_after_commit([(attachment.storage_key, attachment.multipart_upload_id)])
    usage_before = usage_snapshot(attachment)
    attachment.lifecycle = Lifecycle.DISCARDED
    attachment.discarded_at = now
    # Due at once, and never later than it already was (an expired row stays due).
    attachment.expires_at = now if attachment.expires_at is None else min(attachment.expires_at, now)
    delta = usage_delta(attachment, before=usage_before)  # it stops counting now, not when swept
    attachment.save(update_fields=["lifecycle", "discarded_at", "expires_at", "updated_at"])
    usage_move(attachment, delta, change_written=True)
    lifecycle_audit([(attachment.pk, Lifecycle.STAGED)], event="discard", to=Lifecycle.DISCARDED, actor=actor)


def attachments_discard_all(*, user: AbstractBaseUser, now: datetime | None = None) -> int:
    """Discard every staged attachment of the user, or of its subject when confined (what logging out does)."""
    now = now or timezone.now()
    with transaction.atomic():
        # A held draft stays (logging out is no reason to override a hold).
        staged = Attachment.objects.filter(not_held_q(), owned_q(user), lifecycle=Lifecycle.STAGED)
        abort_after_commit(
            list(staged.filter(multipart_upload_id__isnull=False).values_list("storage_key", "multipart_upload_id"))
        )
        # The ids first (under lock): each discarded row gets its audit entry.
        ids = list(staged.select_for_update().order_by("pk").values_list("pk", flat=True))
        lifecycle_audit(
            [(pk, Lifecycle.STAGED) for pk in ids], event="discard_all", to=Lifecycle.DISCARDED, actor=user_actor(user)
        )
        usage_release(Attachment.objects.filter(pk__in=ids, lifecycle=Lifecycle.STAGED))
        return Attachment.objects.filter(pk__in=ids, lifecycle=Lifecycle.STAGED).update(
            lifecycle=Lifecycle.DISCARDED,
            discarded_at=now,
            updated_at=now,
            expires_at=Least(
                Coalesce("expires_at", Value(now, output_field=DateTimeField())),
                Value(now, output_field=DateTimeField()),
            ),
        )


def _commit_problem(attachment: Attachment | None, ref: str, now: datetime) -> str | None:
    if attachment is None:
        return "not_found"
    if attachment.lifecycle == Lifecycle.DELETED:
        # Swept (or lost a race with the sweeper): say why it went, as before the sweep.
        if attachment.released_at:
            return "released"
        return "discarded" if attachment.discarded_at else "expired"
    if attachment.lifecycle == Lifecycle.COMMITTED:
        return None if attachment.ref == ref else "already_committed"
    if attachment.lifecycle == Lifecycle.DISCARDED:
        return "discarded"
    if attachment.lifecycle == Lifecycle.RELEASED:
        # Within the grace, committing it again to its ref takes it back (an edit undone, or the loser of
        # two racing edits). Elsewhere or later it is gone.
        live = attachment.ref == ref and attachment.expires_at is not None and attachment.expires_at > now
        return None if live else "released"
    if attachment.approval == Approval.PENDING:
        # A guest's file that waits for approval reaches its ref only through approve.
        return "pending_approval"
    if is_expired(attachment, now):
        return "expired"
    if attachment.status == Status.REJECTED:
        return "rejected"
    if attachment.status == Status.FAILED:
        return "failed"
    return None


def attachments_commit(
    *,
    owner: AbstractBaseUser,
    ids: Sequence[object],
    ref: str,
    now: datetime | None = None,
    actor: str | None = None,
    replace: bool = False,
) -> list[str]:
    """Bind attachments to `ref`, all or nothing; re-committing to the same ref is a no-op.

    With `replace`, the ids become the ref's whole set: the owner's other files
    committed to it are released in the same transaction (an ad edited from ten
    photos to eight). Rows are locked in primary-key order after the owner's
    lock, so two racing commits cannot deadlock, two replacing commits of one
    ref run one after the other (the later one's set wins whole), and the
    sweeper (which locks before deleting) cannot take one mid-commit.
    """
    now = now or timezone.now()
    if not ids:
        raise ValidationFailed(details={"ids": ["At least one id is required."]})
    if not isinstance(ref, str) or not ref or len(ref) > 200:
        raise ValidationFailed(details={"ref": ["A non-empty string of at most 200 characters."]})
    grant = client_token_of(owner)
    if grant is not None:
        client_token_check_commit(grant, ref=ref, replace=replace)
    parsed, bad = parse_ids(ids)
    problems: dict[str, str] = {raw: "not_found" for raw in bad}
    with transaction.atomic():
        lock_owner(owner.pk)  # before any row: the single-slot rule below locks the owner's other rows
        wanted = Q(pk__in=parsed)
        if replace:  # the ref's current set, locked with the new one in the same primary-key order
            wanted |= Q(ref=ref, lifecycle=Lifecycle.COMMITTED)
        locked = {a.pk: a for a in Attachment.objects.select_for_update().filter(wanted, owned_q(owner)).order_by("pk")}
        requested = set(parsed)
        rows = {pk: a for pk, a in locked.items() if pk in requested}
        for attachment_id in parsed:
            problem = _commit_problem(rows.get(attachment_id), ref, now)
            if problem:
                problems[str(attachment_id)] = problem
        if problems:
            raise AttachmentInvalid(details=problems)
        to_commit = [pk for pk, a in rows.items() if a.lifecycle != Lifecycle.COMMITTED]
        # Committing a released file back is a restore: a hold keeps it as it was when held.
        refuse_held([pk for pk in to_commit if rows[pk].lifecycle == Lifecycle.RELEASED], what="restored")
        # A ready file's twin is decided again now that its ref is known (services/duplicates.py).
        twins = duplicates_in_ref(rows=[rows[pk] for pk in to_commit], ref=ref)
        Attachment.objects.filter(pk__in=to_commit).update(
            lifecycle=Lifecycle.COMMITTED,
            committed_at=now,
            ref=ref,
            expires_at=None,
            released_at=None,
            updated_at=now,
            **duplicate_of_update(twins),
        )
        actor = actor or user_actor(owner)
        lifecycle_audit(
            [(pk, rows[pk].lifecycle) for pk in to_commit],
            event="commit",
            to=Lifecycle.COMMITTED,
            actor=actor,
            message=f"ref {ref}",
        )
        if replace:
            release_locked(
                [a for pk, a in locked.items() if pk not in requested],
                now=now,
                actor=actor,
                message=f"ref {ref} replaced",
            )
        # Committing a ready avatar is the user's "use this one": the old one goes in
        # the same transaction, so a commit that fails (or loses to the sweeper) never touches it.
        for subject, profile in {
            (rows[pk].subject, rows[pk].profile) for pk in to_commit if rows[pk].status == Status.READY
        }:
            single_slot_settle(owner_id=owner.pk, subject=subject, profile_name=profile, now=now, actor=actor)
    return [str(pk) for pk in dict.fromkeys(parsed)]


def attachment_commit_to(
    *, instance: models.Model, attachments: Iterable[Attachment | uuid.UUID | str], owner: AbstractBaseUser
) -> list[str]:
    """Commit attachments to a host-app model instance (`app_label.model:pk` as the ref)."""
    ref = f"{instance._meta.label_lower}:{instance.pk}"
    ids = [a.pk if isinstance(a, Attachment) else a for a in attachments]
    return attachments_commit(owner=owner, ids=ids, ref=ref)
