"""What an operator or a user should know is not running normally: paused uploads, active brakes.

One list, shown by `/readyz` (as degraded states, ops/health.py), the admin
dashboard and the upload page (as a banner), so the three never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured

from . import brakes
from .models import DeadLetter
from .services import backlog


@dataclass(frozen=True)
class Notice:
    kind: str  # "uploads_paused" | "brake" | "dead_letters" | "scanner" | "confinement"
    message: str
    # Where staff fix it: an admin URL *name* (reversed by whoever renders it) plus its query string.
    fix_url: str = ""
    fix_query: str = ""


def uploads_paused(*, tenant_id: int | None = None) -> list[Notice]:
    """Tenants whose new uploads are refused for their backlog (only `tenant_id`'s, when given)."""
    paused = backlog.paused_tenants()
    if tenant_id is not None:
        paused = [row for row in paused if row["tenant_id"] == tenant_id]
    return [
        Notice(
            "uploads_paused",
            f"New uploads are paused for tenant {row['tenant']}: {row['late_files']} uploaded files have "
            f"waited for processing longer than {row['max_backlog_seconds']:g} s.",
            "admin:attachments_attachment_changelist",
            # The files that pause it (not "stuck over 30 minutes": the limit is usually far shorter).
            f"question=late&tenant__id__exact={row['tenant_id']}",
        )
        for row in paused
    ]


_BRAKE_MESSAGES = {
    "killswitch": "The sweeper's killswitch is on: no expired or discarded file is deleted.",
    "dry_run": "The sweeper runs in dry-run mode: deletes are recorded, not done.",
}


def brakes_on() -> list[Notice]:
    try:
        brake = brakes.delete_brake()
    except ImproperlyConfigured:
        brake = "killswitch"  # nobody can say: deletes refuse, say so
    return [Notice("brake", _BRAKE_MESSAGES[brake], "admin:sweeper_sweepercontrol_changelist")] if brake else []


def dead_letters_waiting(*, tenant_id: int | None = None) -> list[Notice]:
    """Open dead letters (of `tenant_id`'s files, when given): jobs that gave up and wait for a person."""
    letters = DeadLetter.objects.filter(resolved_at__isnull=True)
    if tenant_id is not None:
        letters = letters.filter(attachment__tenant_id=tenant_id)
    count = letters.count()
    if not count:
        return []
    return [
        Notice(
            "dead_letters",
            f"{count} dead letter(s) wait for a decision (requeue or resolve).",
            "admin:attachments_deadletter_changelist",
            "state=open",
        )
    ]


def service_notices(*, tenant_id: int | None = None, staff: bool = False) -> list[Notice]:
    """Everything degraded right now; with `tenant_id`, that tenant's only; `staff` adds dead letters."""
    notices = [*uploads_paused(tenant_id=tenant_id), *brakes_on()]
    if staff:
        notices += dead_letters_waiting(tenant_id=tenant_id)
    return notices
