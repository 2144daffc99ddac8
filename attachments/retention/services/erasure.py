"""Erasure of a user, a tenant or a subject: every file in scope let go at once, and its tokens revoked.

A subject (attachments/subjects.py: the host's own id for one of its people)
is erased within its tenant: its files, whichever account's token made them,
and the client tokens minted for it; the host's API tokens stay (they act for
the host's other people too).

Staged files are discarded and committed ones released, like their owner
would, but due *now*: erasure skips the release grace (a released or
discarded file's remaining grace too). The grace exists to undo a mistaken
edit of an ad; an erasure request (GDPR art. 17: "without undue delay") is
not undone by the host, and the operator's safeguard is the dry run that
comes first. Held files (retention/services/holds.py) are left exactly as they are and
reported. Removing the objects is the sweeper's (sweeper/erasure.py reaps
the scope's due files at once, under the sweeper's brakes).

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

from ...errors import NotFound
from ...models import ApiToken, Attachment, ClientToken, Derivative, Lifecycle, Tenant
from ...services.quotas import usage_release
from ...services.transitions import lifecycle_audit, user_actor
from ...subjects import client_token_of, confined_subject, parse_subject
from ...tenancy import tenant_of
from .holds import held_q_expression, not_held_q

CHUNK = 1000


@dataclass(frozen=True)
class ErasureScope:
    """Which files: one user's (owner), a whole tenant's or one subject's; and which tokens go."""

    kind: str  # user | tenant | subject
    label: str  # the username, tenant slug or `tenant/subject`, for reports and the audit message
    files: Q  # the attachments in scope
    user_ids: tuple[int, ...]  # whose API tokens go
    client_tokens: Q = Q(pk__in=[])  # which client tokens go (none unless a subject is erased)


def erasure_scope_user(identifier: str | int) -> ErasureScope:
    """The user with this username, or this id when no username matches."""
    users = get_user_model().objects
    user = users.filter(username=str(identifier)).first()
    if user is None and str(identifier).isdigit():
        user = users.filter(pk=int(identifier)).first()
    if user is None:
        raise NotFound(f"No user {identifier!r}.")
    return ErasureScope("user", user.get_username(), Q(owner_id=user.pk), (user.pk,), client_tokens=Q(user_id=user.pk))


def erasure_scope_tenant(slug: str) -> ErasureScope:
    tenant = Tenant.objects.filter(slug=slug).first()
    if tenant is None:
        raise NotFound(f"No tenant {slug!r}.")
    members = tuple(tenant.memberships.values_list("user_id", flat=True))
    return ErasureScope("tenant", tenant.slug, Q(tenant_id=tenant.pk), members, client_tokens=Q(tenant_id=tenant.pk))


def erasure_scope_subject(*, tenant: Tenant | str, subject: object) -> ErasureScope:
    """Every file of one subject of `tenant` (a Tenant or its slug), and its client tokens.

    An unknown subject is no error: it has no files, and the plan says so.
    """
    subject = parse_subject(subject)
    if isinstance(tenant, str):
        found = Tenant.objects.filter(slug=tenant).first()
        if found is None:
            raise NotFound(f"No tenant {tenant!r}.")
        tenant = found
    return ErasureScope(
        "subject",
        f"{tenant.slug}/{subject}",
        Q(tenant_id=tenant.pk, subject=subject),
        (),
        client_tokens=Q(tenant_id=tenant.pk, subject=subject),
    )


@dataclass
class ErasurePlan:
    """What an erasure lets go: files (by lifecycle), their stored objects and bytes; held files it skips."""

    subject: str
    files: int = 0
    by_lifecycle: dict[str, int] = field(default_factory=dict)
    objects: int = 0
    bytes: int = 0
    held: list[str] = field(default_factory=list)
    tokens: int = 0  # API tokens and client tokens that go


def _live(scope: ErasureScope):
    return Attachment.objects.filter(scope.files).exclude(lifecycle=Lifecycle.DELETED)


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


def erasure_plan(scope: ErasureScope, *, now: datetime | None = None) -> ErasurePlan:
    """What erasing `scope` would do now; changes nothing."""
    now = now or timezone.now()
    plan = ErasurePlan(subject=f"{scope.kind} {scope.label}")
    rows = list(_live(scope).annotate(held=held_q_expression()).order_by("pk").values_list("pk", "lifecycle", "held"))
    kept = [pk for pk, lifecycle, held in rows if not held]
    plan.held = [str(pk) for pk, _lifecycle, held in rows if held]
    plan.files = len(kept)
    for _pk, lifecycle, held in rows:
        if not held:
            plan.by_lifecycle[lifecycle] = plan.by_lifecycle.get(lifecycle, 0) + 1
    plan.objects, plan.bytes = stored_footprint(kept)
    plan.tokens = (
        ApiToken.objects.filter(user_id__in=scope.user_ids).count() + _live_client_tokens(scope, now=now).count()
    )
    return plan


def _live_client_tokens(scope: ErasureScope, *, now: datetime):
    """The scope's client tokens still usable at `now` (as logout counts them): an expired one is not revoked again."""
    return ClientToken.objects.filter(scope.client_tokens, revoked_at__isnull=True, expires_at__gt=now)


def api_tokens_revoke(*, user_ids: tuple[int, ...]) -> int:
    """Delete the users' API tokens (a request with one is 401 from now on); returns how many."""
    count, _ = ApiToken.objects.filter(user_id__in=user_ids).delete()
    return count


def erasure_release(scope: ErasureScope, *, actor: str, now: datetime | None = None) -> ErasurePlan:
    """Revoke the scope's tokens, then make every unheld file in it due to the sweeper now.

    Returns the plan as it stood (files, objects, bytes let go; held ids skipped).
    Tokens first: no new upload with them lands behind the erasure.
    """
    now = now or timezone.now()
    plan = erasure_plan(scope, now=now)
    plan.tokens = api_tokens_revoke(user_ids=scope.user_ids) + _live_client_tokens(scope, now=now).update(
        revoked_at=now
    )
    message = f"erasure of {scope.kind} {scope.label}"
    after: uuid.UUID | None = None
    while True:
        with transaction.atomic():
            page = _live(scope).filter(not_held_q())
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


def subject_erase(*, user, subject: object, dry_run: bool = False, now: datetime | None = None) -> ErasurePlan:
    """Erase one subject of the caller's tenant (a host's API request); dry run: the plan only.

    The files become due now; the sweeper removes their objects on its next
    run, under its brakes (killswitch, dry run). A client token never erases
    (its subject's own device is no erasure request), and a request confined to
    one subject by `Airlock-Subject` erases only that one: both are NOT_FOUND,
    as anything outside a caller's reach is.
    """
    subject = parse_subject(subject)
    if client_token_of(user) is not None:
        raise NotFound()
    confined = confined_subject(user)
    if confined is not None and confined != subject:
        raise NotFound()
    scope = erasure_scope_subject(tenant=tenant_of(user), subject=subject)
    if dry_run:
        return erasure_plan(scope, now=now)
    return erasure_release(scope, actor=user_actor(user), now=now)
