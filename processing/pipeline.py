"""Run one pipeline stage for one attachment: load, check the lease, work, record.

The stages and their order are processing/stages.py's: intake (which runs the
scan) → derive → ready. Each stage runs the steps of processing/steps/ that apply
to the file, on what this module reads from storage for them (WORK: one function
per stage); this module stores the files they produce (and takes the upload's
snapshot) and has the services record the outcome.
"""

from __future__ import annotations

import logging
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

from attachments.facts import FileFacts
from attachments.links.services.link_files import link_file_settle
from attachments.models import Attachment, Status
from attachments.naming import derivative_key
from attachments.profiles import get_profile
from attachments.reasons import ReasonCode
from attachments.retention.services.missing_objects import attachment_derivatives_restore
from attachments.services.processing import (
    attachment_advance,
    attachment_begin,
    attachment_is_startable,
    attachment_reject,
    attachment_retry_or_fail,
    attachment_snapshot_record,
    attachment_wait_for_dependency,
)
from attachments.services.single_slot import single_slot_settle
from attachments.storage import get_gateway
from attachments.storage.base import ObjectInfo, StorageError

from . import fairness, inflight, outages
from .errors import ContentRejected, TransientError
from .metrics import STEP_OUTCOMES, STEP_SECONDS, TIME_TO_READY, record_scan_error
from .scanners import ScannerError
from .spool import file_chunks, get_spool
from .stages import DERIVE, INTAKE, SCAN, STAGES
from .steps import StepInput, StepResult
from .steps.digest import sha256_file
from .steps.registry import steps_for

log = logging.getLogger("airlock.pipeline")


@dataclass
class StageResult:
    """What a stage hands to attachment_advance: the facts found and the stored derivatives."""

    facts: FileFacts = field(default_factory=FileFacts)
    derivatives: list[dict[str, Any]] = field(default_factory=list)


def _run_steps(stage: str, given: StepInput) -> StepResult:
    result = StepResult()
    for step in steps_for(stage, given.profile, given.content_type):
        result.merge(step.run(given))
    return result


def _with_metadata(attachment: Attachment, result: StepResult) -> FileFacts:
    facts = replace(result.facts)
    if result.metadata:
        facts.metadata = {**attachment.metadata, **result.metadata}
    return facts


def intake(attachment: Attachment) -> StageResult:
    """Read the bytes once (size, first bytes, every byte into the spool) and run the intake steps, then the scan's.

    Both check the bytes and both fail as infrastructure, so they are one stage:
    one transaction and one queue hop per file. A file over its profile's limit,
    or not the size it declared, is rejected from its size alone, unread.
    """
    profile = get_profile(attachment.profile)
    gateway = get_gateway()
    info = None
    if gateway.rewritable_uploads and not attachment.content_key and not attachment.upload_sealed:
        info = _snapshot(attachment)  # what it verified the copy with: the object intake reads
    if info is None:
        info = gateway.head(attachment.working_key)
    if info is None:
        raise ContentRejected(ReasonCode.OBJECT_MISSING, "The uploaded object is not in storage.")
    # A video whose original was removed is processed again from its copy: what the upload
    # declared described the original, not these bytes.
    declared = not attachment.original_removed
    given = StepInput(
        profile=profile,
        size=info.size,
        head=b"",
        declared_size=attachment.declared_size if declared else None,
        declared_sha256=attachment.declared_sha256 if declared else "",
    )
    if info.size > profile.max_bytes or (given.declared_size is not None and info.size != given.declared_size):
        return StageResult(facts=_with_metadata(attachment, _run_steps(INTAKE.name, given)))  # rejects it
    with get_spool().held(gateway, attachment.working_key, limit=info.size, keep=True, known=info) as path:
        with path.open("rb") as first:
            head = first.read(settings.AIRLOCK_SNIFF_BYTES)
        given = replace(given, head=head, chunks=lambda: file_chunks(path))
        found = _run_steps(INTAKE.name, given)
        checked = StepInput(
            profile=profile,
            size=info.size,
            content_type=found.facts.content_type,
            chunks=lambda: file_chunks(path),
            path=path,  # scanners that read a file (YARA) take it as it is, with no copy of their own
        )
        found.merge(_run_steps(SCAN.name, checked))
    return StageResult(facts=_with_metadata(attachment, found))


def scan(attachment: Attachment) -> StageResult:
    """Scan one local copy of the bytes (every scanner reads it); kept for derive when clean.

    Only for rows and jobs already at the scan stage: intake runs the scan steps itself.
    """
    gateway = get_gateway()
    with get_spool().held(gateway, attachment.working_key, limit=_size_limit(attachment), keep=True) as path:
        given = StepInput(
            profile=get_profile(attachment.profile),
            size=attachment.stored_size,
            content_type=attachment.content_type,
            chunks=lambda: file_chunks(path),
            path=path,  # scanners that read a file (YARA) take it as it is, with no copy of their own
        )
        return StageResult(facts=_with_metadata(attachment, _run_steps(SCAN.name, given)))


def derive(attachment: Attachment) -> StageResult:
    """Hand the bytes to the derive steps as a local file, then store the files they made."""
    profile = get_profile(attachment.profile)
    gateway = get_gateway()
    # On the storage's own filesystem when it has one, so derivatives are renamed into place, not copied.
    with (
        tempfile.TemporaryDirectory(prefix="airlock-", dir=gateway.scratch_dir()) as tmp,
        get_spool().held(
            gateway,
            attachment.working_key,
            limit=_size_limit(attachment),
            keep=False,
            known=_known_snapshot(attachment),
        ) as original,
    ):
        if original.stat().st_size != attachment.stored_size:
            raise TransientError("the object changed size during processing")
        work = Path(tmp) / "work"
        work.mkdir()
        given = StepInput(
            profile=profile,
            size=attachment.stored_size,
            content_type=attachment.content_type,
            path=original,
            work_dir=work,
        )
        found = _run_steps(DERIVE.name, given)
        served = FileFacts(served_key=attachment.working_key)  # the original, unless a rendition is served
        result = StageResult(facts=served.merge(_with_metadata(attachment, found)))
        for made in found.files:
            key = derivative_key(
                tenant_slug=attachment.tenant.slug, attachment_id=attachment.pk, kind=made.kind, ext=made.ext
            )
            size, sha256 = made.size, made.sha256
            if made.served and (not sha256 or size != made.path.stat().st_size):
                size, sha256 = sha256_file(made.path)
            record = _store(
                gateway,
                key,
                made.path,
                made.content_type,
                kind=made.kind,
                dims={"width": made.width, "height": made.height},
            )
            result.derivatives.append(record)
            if made.served:
                # content_type too: a HEIC's served rendition is a JPEG, and the download says so.
                result.facts.merge(FileFacts(served_key=key, size=size, sha256=sha256, content_type=made.content_type))
                if attachment.original_removed:
                    result.facts.stored_size = size  # the copy, made again over itself, is what is stored
        return result


# What each stage of processing/stages.py does to a file (its order and its queue are that table's).
WORK: dict[str, Callable[[Attachment], StageResult]] = {INTAKE.name: intake, SCAN.name: scan, DERIVE.name: derive}


def load(attachment_id: uuid.UUID) -> Attachment | None:
    """The row a stage works on, with its tenant (one query, no lock)."""
    return Attachment.objects.for_step().by_pk(attachment_id)


def current(attachment_id: uuid.UUID, token: uuid.UUID, stage: str) -> Attachment | None:
    """The row, if this job's lease and stage are still the row's; None for a stale or duplicate job."""
    attachment = load(attachment_id)
    if (
        attachment is None
        or attachment.status != Status.PROCESSING
        or attachment.lease_token != token
        or attachment.step != stage
    ):
        return None
    return attachment


def _transient_types() -> tuple[type[BaseException], ...]:
    return (TransientError, StorageError, ScannerError, OSError)


def run_stage(attachment_id: uuid.UUID, token: uuid.UUID, stage: str, *, attachment: Attachment | None = None) -> str:
    """Run one stage if this job still holds the lease; return what happened.

    `attachment` is the row as current() returned it, when the caller already
    read it (the derive actor needs its tenant first); the services re-check the
    lease under the row lock either way.
    """
    if attachment is None:
        attachment = current(attachment_id, token, stage)
        if attachment is None:
            return "stale"
    work, next_stage = WORK[stage], STAGES[stage].next
    started = time.monotonic()
    # "step" in logs and metric labels: the names operators' dashboards already read.
    context = {"attachment_id": str(attachment_id), "tenant": attachment.tenant.slug, "step": stage}
    try:
        with inflight.holding(attachment_id, token):  # a stopping worker hands this lease back
            # A storage 5xx or timeout: the work runs again at once, a few times, before it counts.
            result = outages.run_through_blips(
                lambda: work(attachment), what=stage, budget=outages.STORAGE_RETRY_SECONDS, errors=(StorageError,)
            )
    except ContentRejected as exc:
        return _rejected(context, started, attachment_id, token, exc)
    except _transient_types() as exc:
        return _failed(context, started, attachment_id, token, stage, exc)
    except Exception as exc:
        if isinstance(exc, outages.infrastructure_errors()):
            raise  # a database or Redis blip: the actor runs the job again (outages.run_through_blips)
        # A bug, neither the file's content nor a dependency: the attempt counts now (retried,
        # then failed with a dead letter), instead of the file waiting for its lease to run out.
        log.exception("step raised an unexpected error", extra={**context, "error": str(exc)[:300]})
        error = f"{stage}: unexpected {type(exc).__name__}: {exc}"
        outcome = attachment_retry_or_fail(attachment_id=attachment_id, token=token, error=error) or "stale"
        _log(context, started, outcome, error=error[:300])
        return outcome
    advanced = attachment_advance(
        attachment_id=attachment_id,
        token=token,
        step=stage,
        facts=result.facts,
        next_step=next_stage,
        derivatives=result.derivatives,
        read=attachment,
    )
    outcome = ("ready" if next_stage is None else "advanced") if advanced else "stale"
    if outcome == "ready":
        if attachment.upload_link_id is not None:  # a guest's file goes to its link's ref (unless it waits approval)
            link_file_settle(attachment_id=attachment_id)
        # A committed avatar that just became ready takes its owner's slot.
        single_slot_settle(owner_id=attachment.owner_id, subject=attachment.subject, profile_name=attachment.profile)
        if attachment.uploaded_at is not None:
            TIME_TO_READY.observe((timezone.now() - attachment.uploaded_at).total_seconds())
    _log(context, started, outcome)
    return outcome


def _failed(
    context: dict, started: float, attachment_id: uuid.UUID, token: uuid.UUID, stage: str, exc: BaseException
) -> str:
    """A stage's infrastructure error: the file retries or waits for the dependency; return which."""
    # A scanner's error is the scan's wherever it ran (intake runs the scan): the error says
    # "scan: …" (the dashboard counts scan errors by it) and the scan-error metric counts it.
    error = f"{SCAN.name if isinstance(exc, ScannerError) else stage}: {type(exc).__name__}: {exc}"
    if stage == SCAN.name or isinstance(exc, ScannerError):
        record_scan_error(getattr(exc, "scanner", "scanner"))
    outcome = _retry_or_wait(attachment_id, token, exc, error)
    _log(context, started, outcome, error=error[:300])
    return outcome


def _retry_or_wait(attachment_id: uuid.UUID, token: uuid.UUID, exc: BaseException, error: str) -> str:
    """A dependency that is down makes the file wait (no attempt counted); a healthy one makes it a retry."""
    down = outages.dependency_down(exc)
    if down is not None:
        waited = attachment_wait_for_dependency(
            attachment_id=attachment_id, token=token, error=down, delay_seconds=outages.dependency_wait_seconds()
        )
        return "waiting" if waited else "stale"
    return attachment_retry_or_fail(attachment_id=attachment_id, token=token, error=error) or "stale"


def tenant_and_subject_of(attachment_id: uuid.UUID) -> tuple[str, str | None] | None:
    """The file's tenant id and subject (one narrow read), for messages that did not carry them."""
    row = Attachment.objects.filter(pk=attachment_id).values_list("tenant_id", "subject").first()
    return None if row is None else (str(row[0]), row[1] or None)


def intake_within_tenant_cap(
    attachment_id: uuid.UUID, tenant: str | None, subject: str | None = None, *, resend: Callable[..., object]
) -> str:
    """Start and run intake in one of its tenant's (and subject's) slots, or park it until one frees (fairness.py)."""
    if tenant is None:
        found = tenant_and_subject_of(attachment_id)
        if found is None:
            return "skipped"
        tenant, subject = found
    return fairness.run_in_slot(
        stage=INTAKE.name,
        key=tenant,
        job_id=attachment_id,
        args=(attachment_id, tenant) if subject is None else (attachment_id, tenant, subject),
        run=lambda: start_and_intake(attachment_id),
        resend=resend,
        subject=subject,
    )


def stage_within_tenant_cap(
    attachment_id: uuid.UUID,
    token: uuid.UUID,
    stage: str,
    tenant: str | None,
    subject: str | None = None,
    *,
    resend: Callable[..., object],
) -> str:
    """Run a stage after intake (derive; the scan, for rows already at it) in one of its tenant's
    (and subject's) slots, or park it until one frees.

    With the tenant (and subject) in the message, a job over a cap is parked
    without touching the database; run_stage checks the lease once it holds its
    slots (they only pick whose slots it waits for). Without the tenant (messages
    sent before it rode along), one read gives the tenant, the subject and the
    lease check.
    """
    attachment = None
    if tenant is None:
        attachment = current(attachment_id, token, stage)
        if attachment is None:
            return "stale"
        tenant, subject = str(attachment.tenant_id), attachment.subject or None
    return fairness.run_in_slot(
        stage=stage,
        key=tenant,
        job_id=attachment_id,
        args=(attachment_id, token, tenant) if subject is None else (attachment_id, token, tenant, subject),
        run=lambda: run_stage(attachment_id, token, stage, attachment=attachment),
        resend=resend,
        subject=subject,
    )


def rederive(attachment_id: uuid.UUID) -> str:
    """Make a ready file's derivatives again from its original (reconcile found some gone); it stays ready.

    No lease: the file is not re-checked, only its derived bytes are made again,
    and the service records them only if the row still serves the same original.
    A failure is logged and left for the next reconcile run to find again.
    """
    attachment = load(attachment_id)
    if attachment is None or attachment.status != Status.READY:
        return "stale"
    working_key = attachment.working_key
    started = time.monotonic()
    context = {"attachment_id": str(attachment_id), "tenant": attachment.tenant.slug, "step": "rederive"}
    try:
        result = derive(attachment)
    except ContentRejected as exc:  # it passed once: a new limit does not take a served file down here
        _log(context, started, "error", reason_code=exc.code, error=exc.message[:300])
        return "error"
    except _transient_types() as exc:
        _log(context, started, "error", error=f"{type(exc).__name__}: {exc}"[:300])
        return "error"
    restored = attachment_derivatives_restore(
        attachment_id=attachment_id, working_key=working_key, derivatives=result.derivatives, facts=result.facts
    )
    outcome = "regenerated" if restored else "stale"
    _log(context, started, outcome)
    return outcome


def _rejected(context: dict, started: float, attachment_id: uuid.UUID, token: uuid.UUID, exc: ContentRejected) -> str:
    rejected = attachment_reject(attachment_id=attachment_id, token=token, code=exc.code, message=exc.message)
    outcome = "rejected" if rejected else "stale"
    _log(context, started, outcome, reason_code=exc.code)
    return outcome


def _log(context: dict, started: float, outcome: str, **extra: object) -> None:
    duration = time.monotonic() - started
    STEP_SECONDS.labels(step=context["step"]).observe(duration)
    STEP_OUTCOMES.labels(step=context["step"], outcome=outcome).inc()
    log.info("step", extra={**context, "duration_ms": round(duration * 1000, 1), "outcome": outcome, **extra})


def start_and_intake(attachment_id: uuid.UUID) -> str:
    """Take the lease and run intake.

    Where uploaded bytes are write-once (local storage: our PUT handler claims
    the key once), intake's reads cannot go stale, so a clean intake (with its
    scan) runs before the lease and is recorded with it. Anything else (a
    rejection, an error, storage that clients can overwrite and that needs a
    snapshot first) takes the long way, under the lease.
    """
    if not get_gateway().rewritable_uploads:
        attachment = load(attachment_id)
        if not attachment_is_startable(attachment):
            return "skipped"
        started = time.monotonic()
        context = {"attachment_id": str(attachment_id), "tenant": attachment.tenant.slug, "step": INTAKE.name}
        try:
            # The scan can take long: a live worker keeps the job, a stopping one sends it again (inflight.py).
            with inflight.intaking(attachment_id):
                facts: FileFacts | None = intake(attachment).facts
        except ContentRejected as exc:
            token = attachment_begin(attachment_id=attachment_id, read=attachment)
            return "skipped" if token is None else _rejected(context, started, attachment_id, token, exc)
        except ScannerError as exc:
            # The scanners gave no verdict: the attempt retries (or waits for them) now, without
            # a second scan under the lease that would ask them again at once.
            token = attachment_begin(attachment_id=attachment_id, read=attachment)
            return "skipped" if token is None else _failed(context, started, attachment_id, token, INTAKE.name, exc)
        except _transient_types():
            facts = None  # retried below under the lease, with backoff if it persists
        if facts is not None:
            if (
                attachment_begin(
                    attachment_id=attachment_id, intake_facts=facts, next_step=DERIVE.name, read=attachment
                )
                is None
            ):
                return "skipped"
            _log(context, started, "advanced")
            return "advanced"
    token = attachment_begin(attachment_id=attachment_id)
    if token is None:
        return "skipped"
    return run_stage(attachment_id, token, INTAKE.name)


# ---------------------------------------------------------------- storage IO for the steps
def _snapshot(attachment: Attachment) -> ObjectInfo:
    """Move the upload to a key only the server writes, before anything looks at it; return the copy's info.

    Everything after this reads the snapshot, so bytes replayed onto the upload
    key later are never scanned-then-swapped; the replay itself is deleted when
    its storage event arrives.

    The copy's size is the one "complete" saw when the copy has the ETag it saw
    (the same bytes: a POSTed upload's ETag is its MD5), so no HEAD; a copy with
    another ETag (the upload replaced since), or with none to compare, is HEADed.
    """
    gateway = get_gateway()
    target = derivative_key(tenant_slug=attachment.tenant.slug, attachment_id=attachment.pk, kind="original", ext="bin")
    try:
        etag = gateway.copy(attachment.storage_key, target)
    except StorageError:
        # Only a failed copy asks whether the upload is there: a missing one is the file's fault, not storage's.
        if gateway.head(attachment.storage_key) is None:
            raise ContentRejected(ReasonCode.OBJECT_MISSING, "The uploaded object is not in storage.") from None
        raise
    info: ObjectInfo | None
    if etag and etag == attachment.arrived_etag and attachment.arrived_size is not None:
        info = ObjectInfo(key=target, size=attachment.arrived_size, etag=etag)
    else:
        info = gateway.head(target)
    if info is None:
        raise TransientError("snapshot copy did not verify")
    token = attachment.lease_token
    if token is None or not attachment_snapshot_record(attachment_id=attachment.pk, token=token, content_key=target):
        gateway.delete(target)
        raise TransientError("lost the lease while taking the snapshot")
    attachment.content_key = target
    gateway.delete_unchecked(attachment.storage_key)  # the copy just read it: no HEAD to ask whether it is there
    return info


def _known_snapshot(attachment: Attachment) -> ObjectInfo | None:
    """The working key's size from the row when that key is the snapshot, so a reader needs no HEAD.

    The server writes a snapshot once and never again, and intake measured it
    (stored_size). A copy made over a removed original is rewritten by derive:
    that one, and an upload key, are asked.
    """
    if not attachment.content_key or attachment.original_removed or attachment.stored_size is None:
        return None
    return ObjectInfo(key=attachment.content_key, size=attachment.stored_size)


def _size_limit(attachment: Attachment) -> int:
    """No read takes more than intake measured (or, before it did, the profile's limit)."""
    if attachment.stored_size is not None:
        return attachment.stored_size
    return get_profile(attachment.profile).max_bytes


def _store(gateway, key: str, path: Path, content_type: str, *, kind: str, dims: dict) -> dict[str, Any]:
    """Write a derivative: it must be durable before the flip to ready.

    No read-back: both gateways return only once the write is stored whole (S3 answered
    the PUT or the multipart completion; a local file and its directory are synced).
    """
    written = gateway.move_file_in(key, path, content_type=content_type)
    return {
        "kind": kind,
        "storage_key": key,
        "content_type": content_type,
        "size": written,
        "width": dims.get("width"),
        "height": dims.get("height"),
    }
