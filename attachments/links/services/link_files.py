"""Files sent through an upload link reach the link's ref by themselves: committed once ready and approved.

Lower than approval.py and upload_links.py, so the pipeline (a file became
ready) and the approval service (a host approved it) share one rule.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from ...models import Approval, Attachment, Lifecycle, Status
from ...services.transitions import lifecycle_audit

# A link file may be committed when nobody has to approve it, or somebody did.
COMMITTABLE_APPROVALS = (Approval.NOT_REQUIRED, Approval.APPROVED)


def link_files_commit_locked(rows: Iterable[Attachment], *, now: datetime, actor: str) -> list[uuid.UUID]:
    """Commit to their link's ref the locked rows that are staged, ready and approved (or need no approval).

    Rows must carry `upload_link` (select_related) or be left out; returns the ids committed.
    """
    by_ref: dict[str, list[Attachment]] = {}
    for row in rows:
        link = row.upload_link if row.upload_link_id is not None else None
        if (
            link is not None
            and row.lifecycle == Lifecycle.STAGED
            and row.status == Status.READY
            and row.approval in COMMITTABLE_APPROVALS
        ):
            by_ref.setdefault(link.ref, []).append(row)
    committed: list[uuid.UUID] = []
    for ref, group in by_ref.items():
        ids = [a.pk for a in group]
        Attachment.objects.filter(pk__in=ids, lifecycle=Lifecycle.STAGED).update(
            lifecycle=Lifecycle.COMMITTED, committed_at=now, ref=ref, expires_at=None, released_at=None, updated_at=now
        )
        lifecycle_audit(
            [(pk, Lifecycle.STAGED) for pk in ids],
            event="commit",
            to=Lifecycle.COMMITTED,
            actor=actor,
            message=f"ref {ref}",
        )
        committed += ids
    return committed


def link_file_settle(*, attachment_id: uuid.UUID, now: datetime | None = None) -> bool:
    """A link's file just became ready: commit it to the link's ref unless it waits for approval."""
    now = now or timezone.now()
    with transaction.atomic():
        rows = list(
            Attachment.objects.select_for_update(of=("self",))
            .select_related("upload_link")
            .filter(pk=attachment_id, upload_link__isnull=False)
            .only("pk", "lifecycle", "approval", "upload_link", "upload_link__ref")
        )
        return bool(link_files_commit_locked(rows, now=now, actor="system:upload_link"))
