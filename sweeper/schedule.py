"""When the scheduler tick should sweep: once per AIRLOCK_SWEEP.interval_seconds, cluster-wide.

"Due" is read from the last recorded run (of any mode, so an instance that
found the lock busy does not retry on every tick); the lock inside the sweep
makes sure that two instances finding it due at once still sweep only once.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from .locks import SweepLock
from .models import SweepRun
from .reaping import ObjectDeleter
from .sweep import SweepReport, sweep_expired


def sweep_due(now: datetime) -> bool:
    last = SweepRun.objects.order_by("-started_at").values_list("started_at", flat=True).first()
    interval = timedelta(seconds=settings.AIRLOCK_SWEEP.interval_seconds)
    # A clock that went backwards (or a run recorded "in the future") must not stop sweeping forever.
    return last is None or last + interval <= now or last > now + interval


def sweep_if_due(
    *, now: datetime | None = None, gateway: ObjectDeleter | None = None, lock: SweepLock | None = None
) -> SweepReport | None:
    """Sweep when the interval has passed since the last run; None when it is not due."""
    now = now or timezone.now()
    if not sweep_due(now):
        return None
    return sweep_expired(now=now, trigger="tick", gateway=gateway, lock=lock)
