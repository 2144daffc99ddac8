"""Rescans: ready files checked again with the signatures in force, staying ready and served throughout.

Two halves:

- ``rescan_one`` is the job (actor ``rescan``): it scans the stored object with
  every configured scanner. Clean: the new signature version is recorded, and
  nothing else changes. A hit: the file is taken down through the services
  (rejected/malware, quarantined, attachment.rejected). An infrastructure
  failure (scanner down, storage error) changes nothing: the file stays ready
  with its old version, so the walk comes back to it.
- ``rescan_tick`` is the background walk, run by the scheduler tick: when the
  signature version in force differs from the one the walk last ran for, it
  walks ready files newest first (recent uploads are the likeliest to carry
  what today's signatures newly know) and queues rescans within
  AIRLOCK_RATE_LIMITS.rescan_files_per_minute, from a checkpoint row (advanced by
  attachments/rescan/services.py), so a restart resumes where it stopped. It
  queues nothing while uploads are waiting in the pipeline, and its jobs run on
  their own queue at a lower priority: new uploads go first.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from attachments.models import Attachment, Lifecycle, RescanCheckpoint, Status
from attachments.rescan.services import (
    attachment_rescan_clean,
    attachment_rescan_reject,
    rescan_walk_advance,
)
from attachments.storage import get_gateway
from attachments.storage.base import StorageError

from ..metrics import RESCAN_OUTCOMES, RESCAN_QUEUED, record_scan_error, record_scan_verdicts
from ..scanners import ScannerError, scan_all, scanners_from_settings, signature_version
from ..steps.scan import LIMIT_HEURISTIC

log = logging.getLogger("airlock.rescan")


def signatures_in_force() -> str:
    """The version every scanner configured here would judge with now; ScannerError when one is down."""
    return signature_version(scanners_from_settings())


def rescan_one(attachment_id: uuid.UUID) -> str:
    """Scan a ready file's stored object again; return clean, rejected, error, limit, current or skipped."""
    attachment = (
        Attachment.objects.only("storage_key", "content_key", "lifecycle", "scan_signatures", "rescan_requested_at")
        .filter(status=Status.READY)
        .by_pk(attachment_id)
    )
    if attachment is None or attachment.lifecycle in (Lifecycle.DISCARDED, Lifecycle.DELETED):
        return _outcome(attachment_id, "skipped")
    gateway = get_gateway()
    try:
        scanners = scanners_from_settings()
        version = signature_version(scanners)  # before the scan: see processing/steps/scan.py
        if version == attachment.scan_signatures and attachment.rescan_requested_at is None:
            return _outcome(attachment_id, "current")  # a duplicate job, or scanned since it was queued
        verdicts = scan_all(scanners, lambda: gateway.iter_chunks(attachment.working_key))
    except (ScannerError, StorageError, OSError) as exc:
        # Left ready with its old version: the walk queues it again on its next pass.
        record_scan_error(getattr(exc, "scanner", "rescan"))
        return _outcome(attachment_id, "error", error=f"{type(exc).__name__}: {exc}"[:300])
    record_scan_verdicts(verdicts)
    hit = next((v for v in verdicts if v.infected), None)
    if hit is not None and LIMIT_HEURISTIC in (hit.signature or ""):
        # A bound of the scanner's configuration, not a signature: not a reason to take a served file down.
        return _outcome(attachment_id, "limit", signature=hit.signature)
    if hit is not None:
        message = f"{hit.scanner}: {hit.signature or 'infected'}"
        done = attachment_rescan_reject(attachment_id=attachment_id, signatures=version, message=message)
        return _outcome(attachment_id, "rejected" if done else "skipped", signature=message)
    done = attachment_rescan_clean(attachment_id=attachment_id, signatures=version)
    return _outcome(attachment_id, "clean" if done else "skipped")


def _outcome(attachment_id: uuid.UUID, outcome: str, **extra: object) -> str:
    RESCAN_OUTCOMES.labels(outcome=outcome).inc()
    level = log.warning if outcome in ("rejected", "error", "limit") else log.info
    level("rescan", extra={"attachment_id": str(attachment_id), "step": "rescan", "outcome": outcome, **extra})
    return outcome


def rescan_tick(*, now: datetime | None = None) -> int:
    """Queue the next files of the background rescan within the rate budget; return how many."""
    rate = int(settings.AIRLOCK_RATE_LIMITS.rescan_files_per_minute)
    if rate <= 0:
        return 0
    now = now or timezone.now()
    try:
        version = signatures_in_force()
    except (ScannerError, ImproperlyConfigured) as exc:  # the scanner is down: nothing to rescan with
        log.warning("rescan walk waits: no signature version", extra={"step": "rescan", "error": str(exc)[:300]})
        return 0
    picked = rescan_walk_advance(version=version, rate=rate, now=now)
    RESCAN_QUEUED.inc(picked)
    return picked


def note_signatures_at_boot() -> str | None:
    """A worker says at boot which signatures it scans with, and whether the walk has yet to catch up."""
    try:
        version = signatures_in_force()
    except (ScannerError, ImproperlyConfigured):
        return None
    walked = RescanCheckpoint.objects.filter(pk=RescanCheckpoint.SINGLETON_PK).values_list("version", flat=True).first()
    if walked != version:
        log.warning(
            "signatures in force differ from the last rescan walk's: the scheduler's next tick rescans",
            extra={"step": "rescan", "to_version": version, "from_version": walked},
        )
    else:
        log.info("signatures in force", extra={"step": "rescan", "to_version": version})
    return version
