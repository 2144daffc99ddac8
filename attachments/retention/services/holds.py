"""Retention (legal) holds: platform staff keep a file, or every file of a ref, from every delete path.

A file is held when its own `legal_hold` is set or its (tenant, ref) has an
active RefHold. Every path that would let a file go asks here: discard,
DELETE, release and commit replace refuse with LEGAL_HOLD (all or nothing);
the single-slot rule, discard-all and erasure skip held files and say so; the
sweeper and reconciliation never select them. Clearing a hold puts the file
back where it was: an expired or released file is then due to the sweeper.

Only platform staff place or clear holds (the admin and `manage.py hold`
check it); the services take the actor, and every change is audited.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import BooleanField, ExpressionWrapper, Q
from django.utils import timezone

from ...errors import LegalHold, NotFound, ValidationFailed
from ...models import Attachment, RefHold, Tenant, TransitionLog, ref_held_exists
from ...selectors import forget_ref_holds
from ...services.ids import parse_ids
from ...services.transitions import lifecycle_entries


def held_q() -> Q:
    """Rows under a hold, of their own or their ref's (for filter() / exclude())."""
    return Q(legal_hold=True) | Q(ref_held_exists())


def not_held_q() -> Q:
    """Rows no hold keeps: what a delete path may select."""
    return Q(legal_hold=False) & ~Q(ref_held_exists())


def held_q_expression() -> ExpressionWrapper:
    """The same test as held_q(), as a boolean column to annotate."""
    return ExpressionWrapper(held_q(), output_field=BooleanField())


def held_ids(ids: Iterable[uuid.UUID]) -> set[uuid.UUID]:
    """Which of these attachments are held (one query)."""
    ids = list(ids)
    if not ids:
        return set()
    return set(Attachment.objects.filter(held_q(), pk__in=ids).values_list("pk", flat=True))


def refuse_held(ids: Iterable[uuid.UUID], *, what: str) -> None:
    """Raise LEGAL_HOLD (naming the held ids) when any of these is held; inside the caller's transaction."""
    held = held_ids(ids)
    if held:
        raise LegalHold(
            f"{len(held)} file(s) are under a legal hold: they cannot be {what}.",
            details={str(pk): "legal_hold" for pk in sorted(held)},
        )


def _audit(ids: Iterable[uuid.UUID], *, event: str, actor: str, reason: str) -> None:
    # The same audit table as every lifecycle change, so the admin timeline shows the hold in order;
    # from/to hold the file's lifecycle, which a hold does not change.
    rows = Attachment.objects.filter(pk__in=list(ids)).values_list("pk", "lifecycle")
    TransitionLog.objects.bulk_create(
        lifecycle_entries(
            ((pk, lifecycle, lifecycle) for pk, lifecycle in rows), event=event, actor=actor, message=reason
        )
    )


def _audit_ref(tenant_row: Tenant, ref: str, *, event: str, actor: str, reason: str) -> None:
    # A ref's hold, and its release, go on the timeline of each of its files not deleted yet.
    ids = (
        Attachment.objects.filter(tenant=tenant_row, ref=ref).exclude(lifecycle="deleted").values_list("pk", flat=True)
    )
    _audit(ids, event=event, actor=actor, reason=reason)


def attachment_hold_set(*, attachment_ids: Iterable[object], actor: str, reason: str) -> list[str]:
    """Hold these files (idempotent); returns the ids now held."""
    if not reason.strip():
        raise ValidationFailed(details={"reason": ["Say why the file is held (kept in the audit log)."]})
    parsed, bad = parse_ids(attachment_ids)
    with transaction.atomic():
        rows = list(
            Attachment.objects.select_for_update()
            .filter(pk__in=parsed)
            .exclude(lifecycle="deleted")
            .order_by("pk")
            .values_list("pk", "legal_hold")
        )
        missing = [str(pk) for pk in parsed if pk not in {r[0] for r in rows}] + bad
        if missing:
            raise NotFound(details={pk: "not_found" for pk in missing})
        changed = [pk for pk, held in rows if not held]
        Attachment.objects.filter(pk__in=changed).update(legal_hold=True, updated_at=timezone.now())
        _audit(changed, event="legal_hold", actor=actor, reason=reason)
    return [str(pk) for pk, _ in rows]


def attachment_hold_clear(*, attachment_ids: Iterable[object], actor: str, reason: str = "") -> list[str]:
    """Lift the files' own holds (a hold on their ref stays); returns the ids that changed."""
    parsed, _bad = parse_ids(attachment_ids)
    with transaction.atomic():
        changed = list(
            Attachment.objects.select_for_update()
            .filter(pk__in=parsed, legal_hold=True)
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        Attachment.objects.filter(pk__in=changed).update(legal_hold=False, updated_at=timezone.now())
        _audit(changed, event="legal_hold_clear", actor=actor, reason=reason or "hold cleared")
    return [str(pk) for pk in changed]


def _tenant(slug: str) -> Tenant:
    tenant = Tenant.objects.filter(slug=slug).first()
    if tenant is None:
        raise NotFound(f"No tenant {slug!r}.")
    return tenant


def ref_hold_set(*, tenant: str, ref: str, actor: str, reason: str, now: datetime | None = None) -> RefHold:
    """Hold every file of `ref` in the tenant, now and committed later (idempotent: the active hold stays)."""
    if not ref or len(ref) > 200:
        raise ValidationFailed(details={"ref": ["A non-empty string of at most 200 characters."]})
    if not reason.strip():
        raise ValidationFailed(details={"reason": ["Say why the ref is held (kept in the audit log)."]})
    tenant_row = _tenant(tenant)
    existing = RefHold.objects.filter(tenant=tenant_row, ref=ref, cleared_at__isnull=True).first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            # The ref's rows first: a sweep batch holding one finishes before the hold lands, and
            # skips (SKIP LOCKED) those this transaction holds, so none goes between its check and the hold.
            list(
                Attachment.objects.select_for_update()
                .filter(tenant=tenant_row, ref=ref)
                .order_by("pk")
                .values_list("pk")
            )
            hold = RefHold.objects.create(
                tenant=tenant_row,
                ref=ref,
                reason=reason[:500],
                created_by=actor[:150],
                created_at=now or timezone.now(),
            )
            _audit_ref(tenant_row, ref, event="legal_hold", actor=actor, reason=f"ref {ref}: {reason}")
    except IntegrityError:  # another staff member held it at the same moment: theirs is the hold
        return RefHold.objects.get(tenant=tenant_row, ref=ref, cleared_at__isnull=True)
    _forget_now_and_on_commit()
    return hold


def ref_hold_clear(*, tenant: str, ref: str, actor: str, now: datetime | None = None) -> bool:
    """Lift the ref's active hold (the record stays, with who cleared it); False when there was none."""
    tenant_row = _tenant(tenant)
    with transaction.atomic():
        hold = RefHold.objects.select_for_update().filter(tenant=tenant_row, ref=ref, cleared_at__isnull=True).first()
        if hold is None:
            return False
        hold.cleared_at = now or timezone.now()
        hold.cleared_by = actor[:150]
        hold.save(update_fields=["cleared_at", "cleared_by"])
        _audit_ref(tenant_row, ref, event="legal_hold_clear", actor=actor, reason=f"ref {ref} released")
        _forget_now_and_on_commit()
    return True


def _forget_now_and_on_commit() -> None:
    # Now, for this transaction's own reads; on commit, for a read that cached the old holds meanwhile.
    forget_ref_holds()
    transaction.on_commit(forget_ref_holds)


@dataclass(frozen=True)
class HoldRow:
    kind: str  # file | ref
    tenant: str
    target: str  # the attachment id, or the ref
    reason: str
    by: str
    at: datetime | None


def holds_list(*, tenant: str | None = None) -> list[HoldRow]:
    """Active holds: refs (with their reason and who set them), then held files."""
    refs = RefHold.objects.filter(cleared_at__isnull=True).select_related("tenant").order_by("created_at")
    files = Attachment.objects.filter(legal_hold=True).select_related("tenant").order_by("created_at")
    if tenant is not None:
        refs, files = refs.filter(tenant__slug=tenant), files.filter(tenant__slug=tenant)
    rows = [HoldRow("ref", h.tenant.slug, h.ref, h.reason, h.created_by, h.created_at) for h in refs]
    latest = {
        pk: (actor, message, at)
        for pk, actor, message, at in TransitionLog.objects.filter(attachment__in=files, transition="legal_hold")
        .order_by("created_at")
        .values_list("attachment_id", "actor", "message", "created_at")
    }
    for a in files.only("pk", "tenant__slug"):
        actor, message, at = latest.get(a.pk, ("", "", None))
        rows.append(HoldRow("file", a.tenant.slug, str(a.pk), message, actor, at))
    return rows
