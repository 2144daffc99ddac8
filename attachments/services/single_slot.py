"""Single-slot profiles (avatar): the owner's chosen file replaces the older ones.

"Replace, then delete": a file takes the slot only once it is ready *and*
committed (committing is the user's "use this one"). Until then the old one
stays served; a replacement that is abandoned, rejected or fails never
touches it. Among several ready, committed files the latest commit wins.
Losers are discarded (the sweeper deletes their bytes on its next tick).
"""

from __future__ import annotations

import uuid
from datetime import datetime

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from ..models import Attachment, Lifecycle, Status
from ..profiles import all_profiles
from ..retention.services.holds import held_ids
from .quotas import usage_release
from .transitions import lifecycle_audit

_LIVE = (Lifecycle.STAGED, Lifecycle.COMMITTED)


def is_single_slot(profile_name: str) -> bool:
    profile = all_profiles().get(profile_name)
    return profile is not None and profile.single_per_owner


def lock_owner(owner_id: int) -> None:
    """Serialise one owner's slot decisions (commit and ready-after-commit).

    Taken before any attachment row, so two commits of different avatars by the
    same owner queue instead of deadlocking on each other's rows. NO KEY UPDATE:
    inserts of new attachments (a key-share lock on the owner) are not blocked.
    """
    list(get_user_model().objects.select_for_update(no_key=True).filter(pk=owner_id).values_list("pk"))


def single_slot_settle(
    *, owner_id: int, subject: str, profile_name: str, now: datetime | None = None, actor: str = "system:pipeline"
) -> list[uuid.UUID]:
    """Discard the subject's ready files the slot's winner replaces; return their ids.

    The slot is the subject's (the host's person), not the token's: one service
    token committing avatars for two of its people keeps both.

    Call it inside the transaction that committed a file (after lock_owner) or
    once a file became ready. The profile is checked first: most profiles are
    not single-slot, and then there is nothing to query.
    """
    if not is_single_slot(profile_name):
        return []
    now = now or timezone.now()
    with transaction.atomic():
        lock_owner(owner_id)
        rows = list(
            Attachment.objects.select_for_update()
            .filter(owner_id=owner_id, subject=subject, profile=profile_name, status=Status.READY, lifecycle__in=_LIVE)
            .order_by("pk")
            .only("pk", "lifecycle", "created_at", "committed_at")
        )
        committed = [a for a in rows if a.lifecycle == Lifecycle.COMMITTED]
        if not committed:
            return []  # nothing chosen yet: whatever is served stays served
        winner = max(committed, key=lambda a: (a.committed_at, a.created_at, a.pk))
        # An older committed choice and older uncommitted candidates lose; a newer
        # candidate the user has not committed yet is left for the user to decide.
        losers = [
            a
            for a in rows
            if a.pk != winner.pk and (a.lifecycle == Lifecycle.COMMITTED or a.created_at < winner.created_at)
        ]
        # A held file keeps its place: the new choice still wins the slot, the held one is not discarded.
        held = held_ids(a.pk for a in losers)
        losers = [a for a in losers if a.pk not in held]
        if losers:
            usage_release(Attachment.objects.filter(pk__in=[a.pk for a in losers]))
            Attachment.objects.filter(pk__in=[a.pk for a in losers]).update(
                lifecycle=Lifecycle.DISCARDED, discarded_at=now, expires_at=now, updated_at=now
            )
            lifecycle_audit(
                [(a.pk, a.lifecycle) for a in losers],
                event="replace",
                to=Lifecycle.DISCARDED,
                actor=actor,
                message=f"replaced by {winner.pk}",
            )
    return [a.pk for a in losers]
