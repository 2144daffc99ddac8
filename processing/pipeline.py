"""Run one pipeline step for one attachment: load, check the lease, work, record.

The shape follows the design: intake → scan → derive → ready. Steps are plain
functions in steps.py; this module owns the bookkeeping around them.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable

from attachments.models import Attachment, Status
from attachments.storage.base import StorageError

from . import inflight, outcomes, steps
from .errors import ContentRejected, TransientError
from .metrics import STEP_OUTCOMES, STEP_SECONDS, TIME_TO_READY

log = logging.getLogger("airlock.pipeline")

STEPS: dict[str, tuple[Callable[[Attachment], steps.StepResult], str | None]] = {
    "intake": (steps.intake, "scan"),
    "scan": (steps.scan, "derive"),
    "derive": (steps.derive, None),
}


# The columns the steps and this module read from the row a step works on (its
# text, the client's claims and the lifecycle dates are never read here). Every
# column a step reads should be here (a missing one costs a query on first touch);
# tests/pipeline/test_statement_counts.py catches it.
STEP_FIELDS = ("tenant__slug", "owner", "profile", "status", "lease_token", "step", "uploaded_at", "lifecycle",
               "storage_key", "content_key", "stored_size", "content_type", "metadata")


def load(attachment_id: uuid.UUID) -> Attachment | None:
    """The row a step works on, with its tenant (one query, no lock)."""
    qs = Attachment.objects.select_related("tenant").only(*STEP_FIELDS).filter(pk=attachment_id)
    return next(iter(qs[:1]), None)  # a slice, not first(): no ORDER BY for a primary key


def current(attachment_id: uuid.UUID, token: uuid.UUID, step: str) -> Attachment | None:
    """The row, if this job's lease and step are still the row's; None for a stale or duplicate job."""
    attachment = load(attachment_id)
    if (attachment is None or attachment.status != Status.PROCESSING or attachment.lease_token != token
            or attachment.step != step):
        return None
    return attachment


def _transient_types() -> tuple[type[BaseException], ...]:
    from processing.scanners import ScannerError

    return (TransientError, StorageError, ScannerError, OSError)


def run_step(attachment_id: uuid.UUID, token: uuid.UUID, step: str, *, attachment: Attachment | None = None) -> str:
    """Do one step if this job still holds the lease; return what happened.

    `attachment` is the row as current() returned it, when the caller already
    read it (the derive actor needs its tenant first); outcomes re-check the
    lease under the row lock either way.
    """
    if attachment is None:
        attachment = current(attachment_id, token, step)
        if attachment is None:
            return "stale"
    work, next_step = STEPS[step]
    started = time.monotonic()
    context = {"attachment_id": str(attachment_id), "tenant": attachment.tenant.slug, "step": step}
    try:
        with inflight.holding(attachment_id, token):  # a stopping worker hands this lease back
            result = work(attachment)
    except ContentRejected as exc:
        return _rejected(context, started, attachment_id, token, exc)
    except _transient_types() as exc:
        error = f"{step}: {type(exc).__name__}: {exc}"
        if step == "scan":
            from .metrics import record_scan_error

            record_scan_error(getattr(exc, "scanner", "scanner"))
        outcome = outcomes.retry_or_fail(attachment_id, token, error=error) or "stale"
        _log(context, started, outcome, error=error[:300])
        return outcome
    advanced = outcomes.advance(attachment_id, token, step, fields=result.fields, next_step=next_step,
                                derivatives=result.derivatives)
    outcome = ("ready" if next_step is None else "advanced") if advanced else "stale"
    if outcome == "ready":
        from django.utils import timezone

        from attachments.services.single_slot import single_slot_settle

        # A committed avatar that just became ready takes its owner's slot.
        single_slot_settle(owner_id=attachment.owner_id, profile_name=attachment.profile)
        if attachment.uploaded_at is not None:
            TIME_TO_READY.observe((timezone.now() - attachment.uploaded_at).total_seconds())
    _log(context, started, outcome)
    return outcome


def derive_within_tenant_cap(attachment_id: uuid.UUID, token: uuid.UUID, tenant: str | None, *,
                             resend: Callable[..., object]) -> str:
    """Run derive in one of its tenant's slots, or park it until one frees.

    With the tenant in the message, a job over its tenant's cap is parked without
    touching the database; run_step checks the lease once it holds a slot (the
    tenant only picks whose slots it waits for). Without it (messages sent before
    the tenant rode along), one read gives the tenant and the lease check.
    """
    from django.conf import settings

    from . import tenant_slots

    attachment = None
    if tenant is None:
        attachment = current(attachment_id, token, "derive")
        if attachment is None:
            return "stale"
        tenant = str(attachment.tenant_id)
    slots = tenant_slots.backend()
    holder = tenant_slots.holder_name(attachment_id)
    ttl_ms = int(settings.AIRLOCK_SANDBOX_WALL_SECONDS * 1000) + 60_000
    parked = tenant_slots.encode((attachment_id, token, tenant))
    if not slots.acquire_or_park(tenant, holder, parked, limit=settings.AIRLOCK_TENANT_CONCURRENCY,
                                 ttl_ms=ttl_ms, park_ttl_ms=settings.AIRLOCK_LEASE_SECONDS * 1000):
        return "parked"  # sent again as soon as one of this tenant's jobs finishes
    try:
        return run_step(attachment_id, token, "derive", attachment=attachment)
    finally:
        _resend_next_parked(slots, tenant, holder, resend)


def _resend_next_parked(slots, tenant: str, holder: str, resend: Callable[..., object]) -> None:
    from . import tenant_slots

    parked = slots.release(tenant, holder)
    args = tenant_slots.decode(parked) if parked else None
    if args is None:
        return
    try:
        resend(*args)  # to the back of the queue: other tenants' jobs already waiting go first
    except Exception as exc:  # the broker is down: the lease reconciler re-drives the file
        log.warning("could not resend a parked derive job", extra={"step": "derive", "error": str(exc)})


def _rejected(context: dict, started: float, attachment_id: uuid.UUID, token: uuid.UUID, exc: ContentRejected) -> str:
    outcome = "rejected" if outcomes.reject(attachment_id, token, code=exc.code, message=exc.message) else "stale"
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
    the key once), intake's reads cannot go stale, so a clean intake runs before
    the lease and is recorded with it. Anything else (a rejection, an error,
    storage that clients can overwrite and that needs a snapshot first) takes
    the long way, under the lease.
    """
    from attachments.storage import get_gateway

    if not get_gateway().rewritable_uploads:
        attachment = load(attachment_id)
        if not outcomes.startable(attachment):
            return "skipped"
        started = time.monotonic()
        context = {"attachment_id": str(attachment_id), "tenant": attachment.tenant.slug, "step": "intake"}
        try:
            facts = steps.intake(attachment).fields
        except ContentRejected as exc:
            token = outcomes.begin(attachment_id)
            return "skipped" if token is None else _rejected(context, started, attachment_id, token, exc)
        except _transient_types():
            facts = None  # retried below under the lease, with backoff if it persists
        if facts is not None:
            if outcomes.begin(attachment_id, intake_facts=facts) is None:
                return "skipped"
            _log(context, started, "advanced")
            return "advanced"
    token = outcomes.begin(attachment_id)
    if token is None:
        return "skipped"
    return run_step(attachment_id, token, "intake")
