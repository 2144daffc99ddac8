"""Operator rescans: flag ready files for the background rescan, which scans them while they stay served.

`manage.py rescan` (and `backfill --rescan`) select ready files and flag them;
serve's scheduler then rescans them newest first within
AIRLOCK_RATE_LIMITS.rescan_files_per_minute (processing/rescan/jobs.py), resumable from its
checkpoint. Nothing here changes a status or queues a job, so a command that
dies half-way hides nothing and loses nothing.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from datetime import datetime

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from attachments.models import Attachment, Lifecycle, Status
from attachments.rescan.services import attachments_request_rescan
from attachments.services.handoff import serve_running

log = logging.getLogger("airlock.rescan")


@dataclass
class RescanReport:
    selected: int = 0
    flagged: int = 0
    dry_run: bool = False
    files_per_minute: int = 0
    serve_running: bool = False
    since: str | None = None
    profile: str | None = None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def summary(self) -> str:
        if self.dry_run:
            return f"rescan: would flag {self.selected} ready files (they stay ready and served)"
        minutes = self.flagged / self.files_per_minute if self.files_per_minute else 0
        where = (
            "serve's scheduler rescans them"
            if self.serve_running
            else "no serve is running: the rescan starts when `manage.py serve` runs"
        )
        return (
            f"rescan: flagged {self.flagged} ready files; they stay ready and served while "
            f"{where}, newest first, at {self.files_per_minute} a minute (about {minutes:.0f} min)"
        )


def rescan_selection(
    *, profile: str | None = None, since: datetime | None = None, now: datetime | None = None
) -> QuerySet[Attachment]:
    """Ready files (not discarded, deleted or expired uncommitted), optionally of one profile and created since."""
    qs = (
        Attachment.objects.filter(status=Status.READY)
        .exclude(lifecycle__in=[Lifecycle.DISCARDED, Lifecycle.DELETED])
        .exclude(lifecycle=Lifecycle.STAGED, expires_at__lte=now or timezone.now())
    )
    if profile:
        qs = qs.filter(profile=profile)
    if since:
        qs = qs.filter(created_at__gte=since)
    return qs


class RescansOff(Exception):
    """Background rescans are switched off: flagged files would never be rescanned."""


def rescan_request(
    *, profile: str | None = None, since: datetime | None = None, dry_run: bool = False, now: datetime | None = None
) -> RescanReport:
    """Flag the selection for a rescan (or count it); the files stay ready throughout."""
    rate = int(settings.AIRLOCK_RATE_LIMITS.rescan_files_per_minute)
    report = RescanReport(
        dry_run=dry_run,
        files_per_minute=rate,
        since=since.isoformat() if since else None,
        profile=profile,
        serve_running=serve_running(now=now) is not None,
    )
    selection = rescan_selection(profile=profile, since=since, now=now)
    report.selected = selection.count()
    if dry_run:
        return report
    if rate <= 0:
        raise RescansOff(
            "background rescans are off (AIRLOCK_RATE_LIMITS rescan_files_per_minute=0): set it above 0 first"
        )
    report.flagged = attachments_request_rescan(queryset=selection, now=now or timezone.now())
    log.info("rescan requested", extra=report.to_dict())
    return report
