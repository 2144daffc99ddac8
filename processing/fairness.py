"""Fair shares of the workers: at most N jobs per tenant across its stages, N deliveries per webhook endpoint.

Dramatiq queues are FIFO. Without a cap, tenant A's burst of a thousand uploads
puts a thousand intake jobs ahead of tenant B's one, then a thousand scan jobs;
B's file waits for all of them at every stage. So every stage works through
tenant slots (processing/tenant_slots.py), one pool per tenant shared by its
intake, scan and derive jobs (a cap per stage would let one tenant hold 3 × N
threads: every thread of a 4-thread worker): a job of a tenant that already runs
AIRLOCK_CONCURRENCY.tenant jobs is *parked* — taken off the queue
into the tenant's waiting room, without touching the database — and sent again,
to the back of its queue, the moment one of that tenant's jobs finishes. A's backlog therefore sits in its waiting
room, not in the queue: what
stands ahead of B's job in any queue is at most N jobs of each other tenant, so
B's time to ready is a few job lengths whatever A's backlog.

Why this design and not another:

- Per-tenant queues or a scheduler that admits from the outbox round-robin
  would need a queue (and a consumer) per tenant, or a new process between the
  outbox and the broker; the slots and the waiting room exist already (derive
  used them first) and work the same on the in-process broker and on Redis.
- Re-enqueueing an over-cap job with a delay leaves slots idle for the whole
  delay and sends each backlog job many times; parking sends it once more,
  exactly when a slot is free. No worker thread waits: a parked job's thread
  goes on to the next message at once.
- Priorities do not exist on the Redis broker.

A single tenant alone runs at most N jobs at once: keep N below the worker
threads so that other tenants, and the parking of a flood, always find one.

Named variants made in web requests (attachments/variants/services/obtain.py) hold a
slot of the same pool while the sandbox makes them (`variant_slot`): a tenant's
viewers and its uploads share one fair share. A request never parks (a browser
waits on it): with no slot free it is refused, and the browser retries.

Within a tenant, a second, smaller pool per subject (a host's person,
attachments/subjects.py): a job carries its subject from the outbox as it
carries its tenant, and takes a slot of its subject's pool
(AIRLOCK_CONCURRENCY.subject, by default the tenant's concurrency − 1) after
its tenant's. One person's flood therefore leaves the tenant at least one slot
for its other people. A job that gets its tenant's slot but finds its subject's
pool full parks in the subject's waiting room (atomically, so a releasing
holder cannot miss it) and gives its tenant slot straight back, which wakes the
tenant's next parked job. A release frees the subject's slot first, then the
tenant's: the subject's next job is sent again when its subject frees a slot,
and each freed slot wakes one job, so a job moves from the tenant's room to its
subject's at most once per wake. With a subject limit at or above the tenant's,
or a message without a subject (sent before it rode along), only the tenant's
pool is used. The recovery paths treat the subject's pool like the tenant's:
a dead worker's holders and an expired holder are freed in every pool, and a
file parked in its subject's room is waiting, not lost.

Webhook deliveries work the same way keyed by endpoint (the "webhook" stage,
AIRLOCK_WEBHOOK_DELIVERY.endpoint_concurrency): an endpoint that answers slowly or not
at all holds at most that many threads, and a flood of one tenant's events to
its endpoint waits in that endpoint's waiting room, not ahead of other
endpoints' deliveries.

Crash safety: a holder is named after its file (or delivery) and its worker;
a worker that stops beating has every slot it held released, and the jobs parked
behind them sent again (processing/recovery.py); holders also expire (`ttl_ms`),
and the scheduler tick sends again the jobs parked behind a holder that expired.
A parked job lost with its process or with Redis is a lost message like any
other: a pending file is re-driven, a lease runs out, a delivery is re-driven
by the webhook tick. Every job is idempotent (a lease, or a claim, decides),
so a duplicate costs a slot for a moment and changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.conf import settings

from attachments import jobs
from attachments.hooks import RenderUnavailable, SlotsFull

from . import tenant_slots
from .stages import DERIVE, STAGES, TRANSCODE_QUEUE

log = logging.getLogger("airlock.pipeline")

WEBHOOK = "webhook"
# A video's web rendition: a pool of its own per tenant (AIRLOCK_CONCURRENCY.transcode_tenant),
# so a tenant's transcodes neither take its upload slots nor every transcode thread.
TRANSCODE = TRANSCODE_QUEUE
VARIANT = "variant"  # a web request's variant: a holder in the tenant's pool, never parked
TENANT_POOL = tenant_slots.DERIVE  # one pool of slots per tenant, shared by its intake, scan and derive jobs
SUBJECT_POOL = "subject"  # within a tenant's pool, one per subject: keyed "<tenant id>/<subject>"
# The job that runs each stage's work (a parked job is sent back to it).
JOB_OF_STAGE: dict[str, jobs.Job] = {
    **{stage.name: stage.job for stage in STAGES.values()},
    WEBHOOK: jobs.WEBHOOK_DELIVER,
    TRANSCODE: jobs.TRANSCODE,
}


def pool_of(stage: str) -> str:
    return stage if stage in (WEBHOOK, TRANSCODE) else TENANT_POOL


def parked_job(parked: str | None) -> tuple[str, tuple[str, ...]] | None:
    """(stage, message args) of a waiting room's entry; entries from before the stage rode along are derive's."""
    args = tenant_slots.decode(parked) if parked else None
    if not args:
        return None
    if args[-1] in JOB_OF_STAGE:
        return args[-1], args[:-1]
    return DERIVE.name, args


def stage_is_capped(stage: str) -> bool:
    if stage == WEBHOOK:
        return settings.AIRLOCK_WEBHOOK_DELIVERY.endpoint_concurrency > 0
    if stage == TRANSCODE:
        return True
    return stage in settings.AIRLOCK_TENANT_FAIR_STAGES


def _limit(stage: str) -> int:
    if stage == TRANSCODE:
        return settings.AIRLOCK_CONCURRENCY.transcode_tenant
    return (
        settings.AIRLOCK_WEBHOOK_DELIVERY.endpoint_concurrency
        if stage == WEBHOOK
        else settings.AIRLOCK_CONCURRENCY.tenant
    )


def subject_limit() -> int:
    """A subject's share of its tenant's slots: the setting, or the tenant's − 1 when that leaves it two.

    Below two, a file's next stage (sent while the stage before it still holds the
    subject's one slot) would park behind its own file at every step: then the
    default is the tenant's share, which turns the subject pool off.
    """
    configured = settings.AIRLOCK_CONCURRENCY.subject
    if configured:
        return configured
    tenant = settings.AIRLOCK_CONCURRENCY.tenant
    return tenant - 1 if tenant - 1 >= 2 else tenant


def subject_key(tenant: str, subject: str) -> str:
    """The subject pool's key: a tenant id has no "/", so the pair is unambiguous whatever the subject."""
    return f"{tenant}/{subject}"


def subject_pool_applies(stage: str, subject: str | None) -> bool:
    """Whether a job at `stage` takes a subject slot too: a pipeline stage, a subject known, a limit that bites."""
    return (
        bool(subject)
        and pool_of(stage) == TENANT_POOL
        and stage_is_capped(stage)
        and subject_limit() < settings.AIRLOCK_CONCURRENCY.tenant
    )


def pool_limit(pool: str) -> int:
    """The cap acquire puts on a pool: a tenant's jobs across its stages, a subject's, or an endpoint's deliveries."""
    return subject_limit() if pool == SUBJECT_POOL else _limit(pool)


def _holder_ttl_ms(stage: str) -> int:
    """How long a slot outlives a holder that never released it: the last resort after the liveness check."""
    if stage == DERIVE.name:
        seconds = settings.AIRLOCK_SANDBOX_LIMITS.wall_seconds
    elif stage == WEBHOOK:
        seconds = settings.AIRLOCK_WEBHOOK_DELIVERY.timeout_seconds
    elif stage == TRANSCODE:  # the longest clip's wall bound: a dead worker's slot is freed by liveness first
        minutes = -(-settings.AIRLOCK_DECODE_LIMITS.media_duration_seconds // 60)
        seconds = settings.AIRLOCK_SANDBOX_LIMITS.transcode_wall_seconds_per_minute * minutes
    else:
        seconds = 10 * 60  # the actors' time limit
    return int(seconds * 1000) + 60_000


def _park_ttl_ms(stage: str) -> int:
    """How long a waiting room no job joins survives (each park renews it); the reconciler re-drives the rest."""
    return max(settings.AIRLOCK_RETRIES.lease_seconds, 3600) * 1000


def run_in_slot(
    *,
    stage: str,
    key: str,
    job_id: object,
    args: tuple,
    run: Callable[[], str],
    resend: Callable[..., object],
    subject: str | None = None,
) -> str:
    """Run `run` in one of `key`'s slots at `stage` (and one of its subject's), or park `args`; "parked" then.

    `key` is the tenant id (the endpoint id for webhooks), `job_id` the file (or
    delivery) the holder is named after, `args` the message that `resend` sends
    again when a release hands it over, `subject` the file's subject (None: the
    tenant's pool only).
    """
    if not stage_is_capped(stage):
        return run()
    slots = tenant_slots.backend()
    holder = tenant_slots.holder_name(job_id)
    pool = pool_of(stage)
    parked = tenant_slots.encode((*args, stage))
    if not slots.acquire_or_park(
        key,
        holder,
        parked,
        limit=_limit(stage),
        ttl_ms=_holder_ttl_ms(stage),
        park_ttl_ms=_park_ttl_ms(stage),
        stage=pool,
    ):
        return "parked"  # sent again as soon as one of this key's jobs finishes
    own = subject_key(key, subject) if subject and subject_pool_applies(stage, subject) else None
    if own is not None and not slots.acquire_or_park(
        own,
        holder,
        parked,
        limit=subject_limit(),
        ttl_ms=_holder_ttl_ms(stage),
        park_ttl_ms=_park_ttl_ms(stage),
        stage=SUBJECT_POOL,
    ):
        # Parked in the subject's room; the tenant slot goes to the tenant's next parked job.
        _resend_next_parked(slots, pool, key, holder, stage, resend)
        return "parked"
    try:
        return run()
    finally:
        if own is not None:  # the subject's first: its next job then finds the tenant's slot free too
            _resend_next_parked(slots, SUBJECT_POOL, own, holder, stage, resend)
        _resend_next_parked(slots, pool, key, holder, stage, resend)


def _resend_next_parked(
    slots: tenant_slots.SlotsBackend, pool: str, key: str, holder: str, stage: str, resend: Callable[..., object]
) -> None:
    try:
        parked = parked_job(slots.release(key, holder, stage=pool))
    except Exception as exc:  # Redis is away: the holder expires, the parked job is re-driven
        log.warning("could not release a slot", extra={"step": stage, "error": str(exc)[:300]})
        return
    if parked is None:
        return
    parked_stage, args = parked
    try:
        if parked_stage == stage:
            resend(*args)  # to the back of the queue: other tenants' jobs already waiting go first
        else:
            import dramatiq

            dramatiq.get_broker().get_actor(JOB_OF_STAGE[parked_stage].actor_name).send(*args)
    except Exception as exc:  # the broker is down: the reconciler re-drives the file (or delivery)
        log.warning("could not resend a parked job", extra={"step": stage, "error": str(exc)[:300]})


@contextmanager
def variant_slot(tenant: str, job: str) -> Iterator[None]:
    """Hold one of `tenant`'s slots (the pipeline's pool) while a variant is made, or raise SlotsFull at once.

    Capped as derive is (variants are derive's work); the holder lives as long as a
    derive job's, and its release hands the slot to the tenant's next parked job.
    """
    if not stage_is_capped(DERIVE.name):
        yield
        return
    slots = tenant_slots.backend()
    holder = tenant_slots.holder_name(f"{VARIANT}-{job}")  # never a file's holder: a lease reaper leaves it
    try:
        acquired = slots.acquire(
            tenant, holder, limit=_limit(DERIVE.name), ttl_ms=_holder_ttl_ms(DERIVE.name), stage=TENANT_POOL
        )
    except Exception as exc:  # Redis is away: an outage for this request, as a sandbox outage is
        raise RenderUnavailable(f"tenant slots unavailable: {exc}"[:300]) from exc
    if not acquired:
        raise SlotsFull(f"the tenant's {_limit(DERIVE.name)} slots are in use")
    try:
        yield
    finally:
        _resend_next_parked(slots, TENANT_POOL, tenant, holder, VARIANT, _never_parked)


def _never_parked(*args: object) -> None:
    raise AssertionError("a variant is refused, never parked")
