"""Which file another one duplicates: the same bytes, the same tenant, the same ref (or subject).

A file's twin is the earliest-created *available* file of its tenant with the
same sha256 (of the served bytes), created before it, and

- committed to the same ref, when the file has a ref;
- of the same subject (in any ref, or none), when it has none yet.

It is decided twice, each time with one read of the att_ready_sha256 index, and
stored in `Attachment.duplicate_of`, so reading the resource costs nothing more:

- when the file becomes ready (attachment_advance's last step): a profile with
  `duplicates: reject` then rejects it with `duplicate` instead;
- when it is committed while ready: its ref is known only now, so the flag is
  decided again against that ref (set or cleared, never a rejection: the file is
  ready already).

Earliest-created, not earliest-ready, so a rescan of the original (ready again,
later than its twin) never makes it the copy. Two twins that become ready at the
same instant do not see each other (neither is ready when the other looks): both
stay unflagged. The flag is a fact of the moment it was decided; a twin that
goes later (discarded, released) leaves it as it was.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime

from django.db.models import Case, Q, QuerySet, Subquery, UUIDField, Value, When

from ..models import Attachment, Lifecycle, Status


def _available_q(now: datetime) -> Q:
    """selectors.servable_now in SQL: ready (the caller's filter), neither gone nor an expired draft."""
    return Q(lifecycle=Lifecycle.COMMITTED) | Q(lifecycle=Lifecycle.STAGED) & (
        Q(expires_at__isnull=True) | Q(expires_at__gt=now)
    )


def duplicate_twin(*, attachment: Attachment, sha256: str, now: datetime) -> uuid.UUID | None:
    """The earlier available file `attachment` (about to be ready with `sha256`) duplicates, or None."""
    found = _twin_query(attachment=attachment, sha256=sha256, now=now)
    return None if found is None else next(iter(found), None)


def duplicate_twin_in_update(*, attachment: Attachment, sha256: str, now: datetime) -> Subquery | None:
    """duplicate_twin as a subquery, for the UPDATE that makes the file ready to decide it in the same statement.

    The same read of att_ready_sha256, taken by that statement instead of one of its own before it.
    """
    found = _twin_query(attachment=attachment, sha256=sha256, now=now)
    return None if found is None else Subquery(found, output_field=UUIDField())


def _twin_query(*, attachment: Attachment, sha256: str, now: datetime) -> QuerySet | None:
    if not sha256:
        return None
    twins = Attachment.objects.filter(tenant_id=attachment.tenant_id, sha256=sha256, status=Status.READY).filter(
        _available_q(now)
    )
    if attachment.ref:
        twins = twins.filter(ref=attachment.ref, lifecycle=Lifecycle.COMMITTED)
    else:
        twins = twins.filter(subject=attachment.subject)
    earlier = Q(created_at__lt=attachment.created_at) | Q(created_at=attachment.created_at, pk__lt=attachment.pk)
    return twins.filter(earlier).order_by("created_at", "pk").values_list("pk", flat=True)[:1]


def duplicates_in_ref(*, rows: Iterable[Attachment], ref: str) -> dict[uuid.UUID, uuid.UUID | None]:
    """For ready rows being committed to `ref` (read whole, under lock): id → its twin in the ref, or None.

    The twins are the ref's available files and the rows themselves (two copies
    committed together: the later-created one is the duplicate). One read.
    """
    ready = [a for a in rows if a.status == Status.READY and a.sha256]
    if not ready:
        return {}
    own = {a.pk for a in ready}
    candidates = sorted(
        Attachment.objects.filter(
            tenant_id__in={a.tenant_id for a in ready},
            sha256__in={a.sha256 for a in ready},
            status=Status.READY,
        )
        .filter(Q(ref=ref, lifecycle=Lifecycle.COMMITTED) | Q(pk__in=own))
        .values_list("created_at", "pk", "tenant_id", "sha256")
    )
    found: dict[uuid.UUID, uuid.UUID | None] = {}
    for row in ready:
        found[row.pk] = next(
            (
                pk
                for created_at, pk, tenant_id, sha256 in candidates
                if tenant_id == row.tenant_id and sha256 == row.sha256 and (created_at, pk) < (row.created_at, row.pk)
            ),
            None,
        )
    return found


def duplicate_of_update(found: dict[uuid.UUID, uuid.UUID | None]) -> dict[str, Case]:
    """The UPDATE keyword that writes `found` (id → twin or None) in the same statement as the rest."""
    if not found:
        return {}
    whens = [When(pk=pk, then=Value(twin, output_field=UUIDField())) for pk, twin in found.items()]
    return {"duplicate_of": Case(*whens, default="duplicate_of", output_field=UUIDField())}
