"""Erasure of a user or a tenant: every file they own let go at once, and their API tokens revoked.

Staged files are discarded and committed ones released, like their owner
would, but due *now*: erasure skips the release grace (a released or
discarded file's remaining grace too). The grace exists to undo a mistaken
edit of an ad; an erasure request (GDPR art. 17: "without undue delay") is
not undone by the host, and the operator's safeguard is the dry run that
comes first. Held files (services/holds.py) are left exactly as they are and
reported. Removing the objects is the sweeper's (sweeper/erasure.py reaps
the subject's due files at once, under the sweeper's brakes).

Rows are changed in primary-key chunks, one transaction each, so erasing a
large tenant never holds all its rows locked at once.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Count, Q, Sum
from django.utils import timezone

from ..errors import NotFound
from ..models import ApiToken, Attachment, Derivative, Lifecycle, Tenant
from .holds import held_q_expression, not_held_q
from .quotas import usage_release
from .transitions import lifecycle_audit

CHUNK = 1000


@dataclass(frozen=True)
class ErasureSubject:
    """Whose files: one user's (owner) or a whole tenant's, and whose tokens."""

    kind: str  # user | tenant
    label: str  # the username or tenant slug, for reports and the audit message
    files: Q  # the attachments they own
    user_ids: tuple[int, ...]  # whose API tokens go


def erasure_subject_user(identifier: str | int) -> ErasureSubject:
    """The user with this username, or this id when no username matches."""
    users = get_user_model().objects
    user = users.filter(username=str(identifier)).first()
    if user is None and str(identifier).isdigit():
        user = users.filter(pk=int(identifier)).first()
    if user is None:
        raise NotFound(f"No user {identifier!r}.")
    return ErasureSubject("user", user.get_username(), Q(owner_id=user.pk), (user.pk,))


def erasure_subject_tenant(slug: str) -> ErasureSubject:
    tenant = Tenant.objects.filter(slug=slug).first()
    if tenant is None:
        raise NotFound(f"No tenant {slug!r}.")
    members = tuple(tenant.memberships.values_list("user_id", flat=True))
    return ErasureSubject("tenant", tenant.slug, Q(tenant_id=tenant.pk), members)


@dataclass
class ErasurePlan:
    """What an erasure lets go: files (by lifecycle), their stored objects and bytes; held files it skips."""

    subject: str
    files: int = 0
    by_lifecycle: dict[str, int] = field(default_factory=dict)
    objects: int = 0
    bytes: int = 0
    held: list[str] = field(default_factory=list)
    tokens: int = 0


def _live(subject: ErasureSubject):
    return Attachment.objects.filter(subject.files).exclude(lifecycle=Lifecycle.DELETED)


def stored_footprint(ids: list[uuid.UUID]) -> tuple[int, int]:
    """(objects, bytes) the rows store: each distinct key of the row and of its derivatives.

    Bytes are the stored size of each copy of the upload (its key, and the
    server's snapshot when there is one) and each derivative's size; a key that
    was never written (an intent never uploaded) counts as an object to delete
    and no bytes.
    """
    objects = size = 0
    for chunk_start in range(0, len(ids), CHUNK):
        chunk = ids[chunk_start : chunk_start + CHUNK]
        for sk, ck, served, qk, stored in Attachment.objects.filter(pk__in=chunk).values_list(
            "storage_key", "content_key", "served_key", "quarantine_key", "stored_size"
        ):
            objects += len({k for k in (sk, ck, served, qk) if k})
            size += (stored or 0) * (2 if ck and ck != sk else 1)
        derived = Derivative.objects.filter(attachment_id__in=chunk).aggregate(n=Count("pk"), b=Sum("size"))
        objects += derived["n"] or 0
        size += derived["b"] or 0
    return objects, size


def erasure_plan(subject: ErasureSubject) -> ErasurePlan:
    """What erasing `subject` would do now; changes nothing."""
    plan = ErasurePlan(subject=f"{subject.kind} {subject.label}")
    rows = list(_live(subject).annotate(held=held_q_expression()).order_by("pk").values_list("pk", "lifecycle", "held"))
    kept = [pk for pk, lifecycle, held in rows if not held]
    plan.held = [str(pk) for pk, _lifecycle, held in rows if held]
    plan.files = len(kept)
    for _pk, lifecycle, held in rows:
        if not held:
            plan.by_lifecycle[lifecycle] = plan.by_lifecycle.get(lifecycle, 0) + 1
    plan.objects, plan.bytes = stored_footprint(kept)
    plan.tokens = ApiToken.objects.filter(user_id__in=subject.user_ids).count()
    return plan


def api_tokens_revoke(*, user_ids: tuple[int, ...]) -> int:
    """Delete the users' API tokens (a request with one is 401 from now on); returns how many."""
    count, _ = ApiToken.objects.filter(user_id__in=user_ids).delete()
    return count


def erasure_release(subject: ErasureSubject, *, actor: str, now: datetime | None = None) -> ErasurePlan:
    """Revoke the subject's tokens, then make every unheld file of theirs due to the sweeper now.

    Returns the plan as it stood (files, objects, bytes let go; held ids skipped).
    Tokens first: no new upload with them lands behind the erasure.
    """
    now = now or timezone.now()
    plan = erasure_plan(subject)
    plan.tokens = api_tokens_revoke(user_ids=subject.user_ids)
    message = f"erasure of {subject.kind} {subject.label}"
    after: uuid.UUID | None = None
    while True:
        with transaction.atomic():
            page = _live(subject).filter(not_held_q())
            if after is not None:
                page = page.filter(pk__gt=after)
            rows = list(page.select_for_update().order_by("pk").values_list("pk", "lifecycle")[:CHUNK])
            if not rows:
                break
            after = rows[-1][0]
            _let_go(rows, now=now, actor=actor, message=message)
    return plan


def _let_go(rows: list[tuple[uuid.UUID, str]], *, now: datetime, actor: str, message: str) -> None:
    staged = [pk for pk, lifecycle in rows if lifecycle == Lifecycle.STAGED]
    committed = [pk for pk, lifecycle in rows if lifecycle == Lifecycle.COMMITTED]
    leaving = [pk for pk, lifecycle in rows if lifecycle in (Lifecycle.DISCARDED, Lifecycle.RELEASED)]
    if staged:
        usage_release(Attachment.objects.filter(pk__in=staged))  # a discarded file stops counting now
        Attachment.objects.filter(pk__in=staged).update(
            lifecycle=Lifecycle.DISCARDED, discarded_at=now, expires_at=now, updated_at=now
        )
    if committed:
        # Still counted until the sweep removes the bytes, like any released file.
        Attachment.objects.filter(pk__in=committed).update(
            lifecycle=Lifecycle.RELEASED, released_at=now, expires_at=now, updated_at=now
        )
    if leaving:  # already on their way out: their remaining grace is skipped
        Attachment.objects.filter(pk__in=leaving, expires_at__gt=now).update(expires_at=now, updated_at=now)
    before = dict(rows)
    to = {Lifecycle.STAGED: Lifecycle.DISCARDED, Lifecycle.COMMITTED: Lifecycle.RELEASED}
    for source in (Lifecycle.STAGED, Lifecycle.COMMITTED, Lifecycle.DISCARDED, Lifecycle.RELEASED):
        ids = [pk for pk, lifecycle in before.items() if lifecycle == source]
        lifecycle_audit(
            [(pk, source) for pk in ids], event="erase", to=to.get(source, source), actor=actor, message=message
        )
