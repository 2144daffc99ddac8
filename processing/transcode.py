"""After a video is ready: drop its original (the copy is durable), then make its web rendition if it needs one.

One job per video on the `transcode` queue (processing/stages.py), sent when the
file becomes ready (attachments/services/processing.py), by a retry, or by the
scheduler tick for a job that was lost (`renditions_redrive`). It runs on worker
threads of its own (ops/runtime.py) and in one of its tenant's transcode slots
(fairness.py), so photos never wait behind it and one tenant's videos cannot take
every transcode thread. The file's status never changes here.

The rendition is made in the sandbox (processing/sandbox/transcode.py) from the
served copy, with CPU and wall limits per minute of video (processing/renditions.py);
its progress is read from the job's work dir while it runs. Re-running is idempotent:
a job claims the work under the row lock, a second one finds the claim and leaves; a
job killed midway leaves a claim that runs out, and the work starts over.
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
import threading
import time
import uuid
from pathlib import Path

from django.db import close_old_connections, connection

from attachments.naming import derivative_key
from attachments.services.renditions import (
    RenditionJob,
    attachment_original_drop,
    rendition_claim,
    rendition_fail,
    rendition_progress,
    rendition_record,
)
from attachments.storage import get_gateway
from attachments.storage.base import StorageError

from .errors import TransientError
from .metrics import record_sandbox
from .renditions import job_bounds, job_limits, job_wall_seconds
from .sandbox import SandboxUnavailable, run_job
from .sandbox.transcode import PROGRESS_NAME
from .sandbox_config import bounds_from_settings, limits_from_settings, member_rules_dir
from .sniff import detect_type
from .spool import get_spool

log = logging.getLogger("airlock.transcode")

WEB_CONTENT_TYPE = "video/mp4"
PROGRESS_POLL_SECONDS = 2.0
PROGRESS_STEP = 0.05  # recorded when it moved this much: a handful of writes per clip
# Killed by the host rather than by the clip's own cost: worth another attempt later.
_RETRIED_KILLS = frozenset({"timeout", "signal", "memory"})


def sha256_of(key: str) -> str:
    """The SHA-256 of a stored object, read in chunks (the original's evidence before it is removed)."""
    digest = hashlib.sha256()
    for chunk in get_gateway().iter_chunks(key):
        digest.update(chunk)
    return digest.hexdigest()


def transcode_one(attachment_id: uuid.UUID) -> str:
    """Drop the original once the copy is durable, then make the web rendition if it is pending."""
    try:
        attachment_original_drop(attachment_id=attachment_id, digest=sha256_of)
    except (StorageError, OSError) as exc:  # the original stays until the next job for this file
        log.warning("could not remove the original", extra={"attachment_id": str(attachment_id), "error": str(exc)})
    job = rendition_claim(attachment_id=attachment_id, wall_seconds_for=job_wall_seconds)
    if job is None:
        return "skipped"
    started = time.monotonic()
    context = {"attachment_id": str(attachment_id), "tenant": job.tenant_slug, "step": "transcode"}
    try:
        outcome = _make(job)
    except (SandboxUnavailable, TransientError, StorageError, OSError) as exc:
        outcome = rendition_fail(
            attachment_id=job.attachment_id, token=job.token, error=f"{type(exc).__name__}: {exc}", retry=True
        )
    log.info(
        "step", extra={**context, "duration_ms": round((time.monotonic() - started) * 1000, 1), "outcome": outcome}
    )
    return outcome or "stale"


def _make(job: RenditionJob) -> str | None:
    gateway = get_gateway()
    bounds = job_bounds(bounds_from_settings(), job.duration_seconds)
    limits = job_limits(limits_from_settings(), job.duration_seconds, bounds)
    with (
        tempfile.TemporaryDirectory(prefix="airlock-", dir=gateway.scratch_dir()) as tmp,
        get_spool().held(gateway, job.source_key, limit=job.source_size, keep=False) as source,
    ):
        work = Path(tmp) / "work"
        work.mkdir()
        with _ProgressReporter(job, work / PROGRESS_NAME):
            # The photos' rules too: asked for other rules, the runner replaces the fork server,
            # and the jobs running on the old one (a photo's, or this one) die with it.
            result = run_job("transcode", source, work, limits=limits, bounds=bounds, member_rules=member_rules_dir())
        record_sandbox(result)
        if result.outcome != "ok":
            retry = result.killed_by in _RETRIED_KILLS
            return rendition_fail(
                attachment_id=job.attachment_id,
                token=job.token,
                error=f"{result.reason_code}: {result.message}",
                retry=retry,
            )
        path = result.files.get("web")
        if path is None:
            raise TransientError("the transcode made no file")
        with open(path, "rb") as fh:
            if detect_type(fh.read(4100)) != WEB_CONTENT_TYPE:
                return rendition_fail(
                    attachment_id=job.attachment_id, token=job.token, error="the rendition is not an MP4", retry=False
                )
        key = derivative_key(tenant_slug=job.tenant_slug, attachment_id=job.attachment_id, kind="web", ext="mp4")
        written = gateway.move_file_in(key, path, content_type=WEB_CONTENT_TYPE)
        info = gateway.head(key)
        if info is None or info.size != written:
            raise TransientError("the web rendition did not verify after writing")
        data = result.data
        derivative = {
            "kind": "web",
            "storage_key": key,
            "content_type": WEB_CONTENT_TYPE,
            "size": written,
            "width": data.get("width") if isinstance(data.get("width"), int) else None,
            "height": data.get("height") if isinstance(data.get("height"), int) else None,
        }
        recorded = rendition_record(
            attachment_id=job.attachment_id, token=job.token, derivative=derivative, codec="h264"
        )
        return "ready" if recorded else None


class _ProgressReporter:
    """While the job runs, record the permille it writes in its work dir (a thread of its own)."""

    def __init__(self, job: RenditionJob, path: Path) -> None:
        self.job, self.path = job, path
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="airlock-transcode-progress", daemon=True)
        self.recorded = 0.0

    def __enter__(self) -> _ProgressReporter:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.thread.join()

    def _read(self) -> float | None:
        try:
            text = self.path.read_text()[:8]
        except (OSError, ValueError):
            return None
        return int(text) / 1000 if text.isdigit() else None

    def _run(self) -> None:
        try:
            while not self.stopping.wait(PROGRESS_POLL_SECONDS):
                progress = self._read()
                if progress is None or progress - self.recorded < PROGRESS_STEP or progress >= 1:
                    continue
                self.recorded = progress
                try:
                    rendition_progress(attachment_id=self.job.attachment_id, token=self.job.token, progress=progress)
                except Exception as exc:  # noqa: BLE001 - progress is a courtesy: the transcode goes on
                    log.warning("could not record progress", extra={"error": str(exc)[:300]})
                    close_old_connections()
        finally:
            connection.close()  # this thread's own connection
