"""A host's decision on what guests sent through a link that requires approval: approve or decline.

Who may decide: the files' owner (the link's service account, acting for
anyone) or a moderator of their tenant, as for release (release.actionable_q).
Only files waiting (`approval == pending`) change; the answer is the ids that
did. Approving a ready file commits it to its link's ref at once (one still
processing is committed when it becomes ready, link_files.link_file_settle);
declining discards it, or releases it if someone had committed it, so the
sweeper removes it. Each decision is audited with its actor and announced
(`attachment.approved` / `attachment.declined`) in the same transaction.
Rows are locked in primary-key order, like every lifecycle change.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from ... import hooks
from ...errors import ValidationFailed
from ...models import Approval, Attachment, Lifecycle, TransitionLog
from ...retention.services.release import MAX_IDS, actionable_q
from ...services.ids import parse_ids
from ...services.lifecycle import discard_locked
from ...services.removal import release_locked
from ...services.transitions import lifecycle_entries, user_actor
from .link_files import link_files_commit_locked


def attachments_approve(
    *,
    user: AbstractBaseUser,
    ids: Sequence[object] | None = None,
    ref: str | None = None,
    now: datetime | None = None,
    actor: str | None = None,
) -> list[str]:
    """Approve the pending files given by ids, or every pending file sent for `ref`; return the ids approved."""
    return _decide(user=user, ids=ids, ref=ref, now=now, actor=actor, to=Approval.APPROVED)


def attachments_decline(
    *,
    user: AbstractBaseUser,
    ids: Sequence[object] | None = None,
    ref: str | None = None,
    now: datetime | None = None,
    actor: str | None = None,
) -> list[str]:
    """Decline the pending files given by ids, or every pending file sent for `ref`; return the ids declined."""
    return _decide(user=user, ids=ids, ref=ref, now=now, actor=actor, to=Approval.DECLINED)


def _which(ids: Sequence[object] | None, ref: str | None) -> Q:
    if (ids is None) == (ref is None):
        raise ValidationFailed(details={"non_field_errors": ["Give exactly one of ref and ids."]})
    if ref is not None:
        if not isinstance(ref, str) or not ref or len(ref) > 200:
            raise ValidationFailed(details={"ref": ["A non-empty string of at most 200 characters."]})
        # A pending file is not committed yet: it belongs to the ref through its link.
        return Q(upload_link__ref=ref) | Q(ref=ref)
    assert ids is not None
    if isinstance(ids, str | bytes) or not ids or len(ids) > MAX_IDS:
        raise ValidationFailed(details={"ids": [f"Between 1 and {MAX_IDS} ids."]})
    parsed, _bad = parse_ids(ids)  # an id that is not one matches nothing: it did not change
    return Q(pk__in=parsed)


def _decide(
    *,
    user: AbstractBaseUser,
    ids: Sequence[object] | None,
    ref: str | None,
    now: datetime | None,
    actor: str | None,
    to: str,
) -> list[str]:
    which = _which(ids, ref)
    now = now or timezone.now()
    actor = actor or user_actor(user)
    with transaction.atomic():
        rows = list(
            Attachment.objects.select_for_update(of=("self",))
            .select_related("upload_link")
            .filter(actionable_q(user), which, approval=Approval.PENDING)
            .exclude(lifecycle__in=(Lifecycle.DISCARDED, Lifecycle.DELETED))  # its guest removed it
            .order_by("pk")
        )
        if not rows:
            return []
        changed = [a.pk for a in rows]
        Attachment.objects.filter(pk__in=changed).update(approval=to, updated_at=now)
        for row in rows:
            row.approval = to
        # The decision first in the timeline, then what it caused (a commit, a discard).
        event = "approve" if to == Approval.APPROVED else "decline"
        TransitionLog.objects.bulk_create(
            lifecycle_entries(((pk, Approval.PENDING, to) for pk in changed), event=event, actor=actor)
        )
        hooks.announce(str(to), changed)
        if to == Approval.APPROVED:
            link_files_commit_locked(rows, now=now, actor=actor)
        else:
            for row in rows:
                if row.lifecycle == Lifecycle.STAGED:
                    discard_locked(row, now=now, actor=actor)
            release_locked(rows, now=now, actor=actor, message="declined")
    return [str(pk) for pk in changed]
