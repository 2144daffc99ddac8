"""What an operator or a user should know is not running normally: paused uploads, active brakes.

One list, shown by `/readyz` (as degraded states, ops/health.py), the admin
dashboard and the upload page (as a banner), so the three never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured

from . import brakes
from .services import backlog


@dataclass(frozen=True)
class Notice:
    kind: str  # "uploads_paused" | "brake"
    message: str


def uploads_paused(*, tenant_id: int | None = None) -> list[Notice]:
    """Tenants whose new uploads are refused for their backlog (only `tenant_id`'s, when given)."""
    paused = backlog.paused_tenants()
    if tenant_id is not None:
        paused = [row for row in paused if row["tenant_id"] == tenant_id]
    return [Notice("uploads_paused",
                   f"New uploads are paused for tenant {row['tenant']}: {row['late_files']} uploaded files have "
                   f"waited for processing longer than {row['max_backlog_seconds']:g} s.")
            for row in paused]


_BRAKE_MESSAGES = {
    "killswitch": "The sweeper's killswitch is on: no expired or discarded file is deleted.",
    "dry_run": "The sweeper runs in dry-run mode: deletes are recorded, not done.",
}


def brakes_on() -> list[Notice]:
    try:
        brake = brakes.delete_brake()
    except ImproperlyConfigured:
        brake = "killswitch"  # nobody can say: deletes refuse, say so
    return [Notice("brake", _BRAKE_MESSAGES[brake])] if brake else []


def service_notices(*, tenant_id: int | None = None) -> list[Notice]:
    """Everything degraded right now; with `tenant_id`, paused uploads of that tenant only."""
    return [*uploads_paused(tenant_id=tenant_id), *brakes_on()]
