"""The sweeper's brakes: a killswitch and a dry-run mode, stored in the database.

The admin toggles them through `sweeper_control_set`; the settings
AIRLOCK_SWEEPER_KILLSWITCH / AIRLOCK_SWEEPER_DRY_RUN ("1"/"0"), when set, win
over the database so an operator can pin them from the environment. A value
that is set but not understood counts as "on": a brake fails safe.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from .models import SweeperControl

log = logging.getLogger("airlock.sweeper")

_ON = {"1", "true", "yes", "on"}
_OFF = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class ControlState:
    killswitch: bool
    dry_run: bool
    killswitch_source: str  # "settings" | "database"
    dry_run_source: str
    changed_by: str
    changed_at: datetime | None

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["changed_at"] = self.changed_at.isoformat() if self.changed_at else None
        return data


def _override(name: str) -> bool | None:
    raw = getattr(settings, name, None)
    if raw is None:
        return None
    value = str(raw).strip().lower()
    if value == "":
        return None
    if value in _OFF:
        return False
    if value not in _ON:
        log.warning("unrecognised sweeper brake value, treating as on", extra={"setting": name, "value": value})
    return True


def _row() -> SweeperControl:
    row, _ = SweeperControl.objects.get_or_create(pk=SweeperControl.SINGLETON_PK)
    return row


def _state(row: SweeperControl) -> ControlState:
    kill, dry = _override("AIRLOCK_SWEEPER_KILLSWITCH"), _override("AIRLOCK_SWEEPER_DRY_RUN")
    return ControlState(
        killswitch=row.killswitch if kill is None else kill,
        dry_run=row.dry_run if dry is None else dry,
        killswitch_source="database" if kill is None else "settings",
        dry_run_source="database" if dry is None else "settings",
        changed_by=row.changed_by,
        changed_at=row.changed_at,
    )


def sweeper_control_get() -> ControlState:
    """Return the effective brakes (settings overrides applied) and who last changed them."""
    row = SweeperControl.objects.filter(pk=SweeperControl.SINGLETON_PK).first()
    return _state(row or SweeperControl())


def delete_brake() -> str:
    """Why automated deletes must not happen now: "killswitch", "dry_run", or "" (go ahead).

    Every automated delete asks this (sweeper, reconcile, unauthorized uploads):
    under the killswitch nothing is deleted; under dry run the keys are recorded instead.
    """
    state = sweeper_control_get()
    if state.killswitch:
        return "killswitch"
    return "dry_run" if state.dry_run else ""


def sweeper_control_set(*, killswitch: bool | None = None, dry_run: bool | None = None, actor: str) -> ControlState:
    """Toggle the stored brakes; None leaves a brake as it is."""
    if not actor:
        raise ValueError("actor is required: every change to the brakes says who made it")
    with transaction.atomic():
        row = _row()
        row = SweeperControl.objects.select_for_update().get(pk=row.pk)
        if killswitch is not None:
            row.killswitch = bool(killswitch)
        if dry_run is not None:
            row.dry_run = bool(dry_run)
        row.changed_by = actor[:150]
        row.changed_at = timezone.now()
        row.save()
    state = _state(row)
    log.warning("sweeper brakes changed", extra={"actor": actor, "killswitch": row.killswitch, "dry_run": row.dry_run})
    return state
