"""Rebuild work from database state: the broker is only a doorbell."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from attachments.models import Attachment, Lifecycle, Status
from attachments.services import outbox
from attachments.services.processing import (
    attachment_lease_extend,
    attachment_requeue_intake,
    attachment_retry_or_fail,
    attachments_touch_parked,
)

from .fairness import (
    JOB_OF_STAGE,
    SUBJECT_POOL,
    TENANT_POOL,
    parked_job,
    pool_limit,
    pool_of,
    subject_key,
    subject_pool_applies,
)
from .liveness import GONE_BEAT, lost_after_seconds, mark_gone_workers, registry
from .stages import INTAKE, STAGES

log = logging.getLogger("airlock.recovery")


@dataclass
class RecoveryReport:
    expired_leases: int = 0
    redriven: int = 0
    relayed: int = 0
    silent_uploads: int = 0
    lost_workers: int = 0
    redriven_after_loss: int = 0
    woken_after_expiry: int = 0


def expire_leases(*, now: datetime | None = None, dry_run: bool = False) -> int:
    """processing past its lease → pending with attempts + 1 (or failed at the cap), its new job sent at once.

    A running job's lease is renewed by its worker's heartbeat (processing/liveness.py),
    so a lease that ran out belongs to a job nobody runs: its worker died, or its
    message was lost on the way. Waiting out a backoff on top would only delay it.
    """
    now = now or timezone.now()
    stuck = list(
        Attachment.objects.filter(status=Status.PROCESSING, lease_expires_at__lt=now).values_list(
            "pk", "lease_token", "step", "tenant_id", "subject"
        )[:1000]
    )
    # A scan or derive job parked behind its tenant's (or subject's) cap is waiting, not lost:
    # a long one-tenant backlog must not turn into retries and, at the cap, failures.
    parked = _parked_files(
        {(step, tenant_id, subject) for _, _, step, tenant_id, subject in stuck if step in _LEASED_STAGES}
    )
    waiting = {(pk, token) for pk, token, step, _, _ in stuck if step in _LEASED_STAGES and str(pk) in parked}
    if dry_run:
        return len(stuck) - len(waiting)
    for pk, token in waiting:
        attachment_lease_extend(attachment_id=pk, token=token, now=now)
    done = 0
    for pk, token, step, tenant_id, subject in stuck:
        if (pk, token) in waiting:
            continue
        if attachment_retry_or_fail(
            attachment_id=pk,
            token=token,
            error="lease expired (worker lost?)",
            actor="system:reconciler",
            backoff=False,
        ):
            done += 1
            if step:
                _free_tenant_slot(step, tenant_id, pk, subject)
    return done


# Stages whose jobs wait parked while holding the file's lease (intake waits before taking it).
_LEASED_STAGES = tuple(name for name in STAGES if name != INTAKE.name)


def _parked_files(rooms: set[tuple[str, int, str]]) -> set[str]:
    """Files parked in the waiting rooms of these (stage, tenant id, subject): the tenant's and the subject's."""
    from . import tenant_slots

    slots = tenant_slots.backend()
    found: set[str] = set()
    for stage, tenant_id, subject in rooms:
        try:
            found |= slots.parked_files(str(tenant_id), stage=pool_of(stage))
            if subject and subject_pool_applies(stage, subject):
                found |= slots.parked_files(subject_key(str(tenant_id), subject), stage=SUBJECT_POOL)
        except Exception as exc:  # cannot tell: treat its jobs as lost, the safe side
            log.warning(
                "could not read parked jobs", extra={"tenant": str(tenant_id), "step": stage, "error": str(exc)}
            )
    return found


def _free_tenant_slot(stage: str, tenant_id: int, attachment_id: object, subject: str) -> None:
    """A job that died holding its tenant's (and subject's) slot would keep it until the slot's TTL.

    The slots are released as a finishing job releases them, the subject's
    first: the next job parked behind each is sent again (through the outbox).
    Nobody else would wake them: the job that was to do so is the dead one.
    """
    from . import tenant_slots

    slots = tenant_slots.backend()
    own = subject and subject_pool_applies(stage, subject)
    pools = [(SUBJECT_POOL, subject_key(str(tenant_id), subject))] if own else []
    try:
        for pool, key in [*pools, (pool_of(stage), str(tenant_id))]:
            for holder in slots.holders_of(key, str(attachment_id), stage=pool):
                _release_and_wake(slots, pool, key, holder)
    except Exception as exc:  # the slot still expires on its own; a parked job's lease runs out
        log.warning(
            "could not free a dead job's tenant slot", extra={"attachment_id": str(attachment_id), "error": str(exc)}
        )


def _free_slots_of_worker(worker_id: str) -> set[uuid.UUID]:
    """Every slot a lost worker held, at every stage, whatever became of its files (a stale or duplicate job holds
    one too); returns the files whose stage jobs held them."""
    from . import tenant_slots

    slots = tenant_slots.backend()
    files: set[uuid.UUID] = set()
    try:
        held = slots.holders_of_worker(worker_id)
        for pool, key, holder in held:
            _release_and_wake(slots, pool, key, holder)
            if pool == TENANT_POOL:
                try:
                    files.add(uuid.UUID(holder.partition("/")[0]))
                except ValueError:  # not a file's holder
                    pass
    except Exception as exc:  # they still expire on their own
        log.warning("could not free a lost worker's tenant slots", extra={"error": str(exc)[:300]})
    return files


def _take_back_leases(files: set[uuid.UUID]) -> int:
    """The leases of files a worker whose process is gone was running: taken back now, not when they run out.

    As when a lease runs out, the file goes back to pending with an attempt counted
    (a file that kills every worker it meets must end somewhere) and its job is sent
    at once. A job of the file still alive elsewhere (a duplicate) finds its lease
    gone and changes nothing.
    """
    taken = 0
    leased = Attachment.objects.filter(pk__in=files, status=Status.PROCESSING, lease_token__isnull=False)
    for pk, token in list(leased.values_list("pk", "lease_token")):
        taken += bool(
            attachment_retry_or_fail(
                attachment_id=pk,
                token=token,
                error="lease taken back: its worker's process is gone",
                actor="system:reconciler",
                backoff=False,
            )
        )
    return taken


def _release_and_wake(slots, pool: str, key: str, holder: str) -> None:
    """Release a slot as a finishing job does: the job parked next is sent again (through the outbox)."""
    _send_again(slots.release(key, holder, stage=pool))


def _send_again(payload: str | None) -> bool:
    parked = parked_job(payload)
    if parked is None:
        return False
    stage, args = parked
    with transaction.atomic():
        outbox.enqueue(JOB_OF_STAGE[stage], *args)
    return True


def wake_behind_expired_slots() -> int:
    """Jobs parked behind a holder that expired (its release was lost) are sent again now.

    Nothing else would send them before the lease re-drive: no release hands
    their freed slot over. Each pool with parked jobs drops its expired holders
    and gives up one parked job per free slot, atomically (tenant_slots.py).
    """
    from . import tenant_slots

    slots = tenant_slots.backend()
    woken = 0
    try:
        for pool, key in slots.pools_with_parked():
            for payload in slots.wake_free(key, limit=pool_limit(pool), stage=pool):
                woken += _send_again(payload)
    except Exception as exc:  # Redis is away: the next tick tries again, the lease re-drive still runs
        log.warning("could not wake jobs parked behind expired slots", extra={"error": str(exc)[:300]})
    if woken:  # a release was lost: worth seeing
        log.info("jobs parked behind expired slots sent again", extra={"count": woken})
    return woken


def redrive_pending(
    *, now: datetime | None = None, older_than_seconds: float | None = None, dry_run: bool = False
) -> int:
    """Pending rows whose bytes arrived but whose job went missing get a new job."""
    now = now or timezone.now()
    if older_than_seconds is None:
        older_than_seconds = max(120.0, settings.AIRLOCK_RETRIES.max_seconds * 1.5)
    cutoff = now - timedelta(seconds=older_than_seconds)
    rows = list(
        Attachment.objects.filter(status=Status.PENDING, uploaded_at__isnull=False, updated_at__lt=cutoff)
        .exclude(lifecycle__in=[Lifecycle.DISCARDED, Lifecycle.DELETED])
        .values_list("pk", "tenant_id", "subject")[:1000]
    )
    # An intake job parked behind its tenant's (or subject's) cap is waiting, not lost: its
    # row is touched (looked at again a while later), not sent a second job.
    parked = _parked_files({(INTAKE.name, tenant_id, subject) for _, tenant_id, subject in rows})
    waiting = [pk for pk, _, _ in rows if str(pk) in parked]
    lost = [pk for pk, _, _ in rows if str(pk) not in parked]
    if dry_run:
        return len(lost)
    attachments_touch_parked(attachment_ids=waiting, now=now)
    for pk in lost:
        attachment_requeue_intake(attachment_id=pk, now=now)
    return len(lost)


def redrive_after_lost_workers(*, now: datetime | None = None) -> tuple[int, int]:
    """A worker that missed three beats is gone: free its tenant slots, re-drive every pending file it may have held.

    A worker whose process is known to be gone (liveness.mark_gone_workers: seen
    from its own host) is lost at once, and the leases of the files its slots
    name are taken back at once too. Otherwise its leases run out by themselves
    (expire_leases); what it had fetched from
    the broker and not acked is invisible here, and Redis gives it back only
    minutes later, at random. So every pending file with its bytes in, whose job
    went out before now, gets a new intake job, once per lost worker (a healthy
    backlog is not re-driven every tick). The job is idempotent: whichever copy
    comes second finds the file started and does nothing.

    Returns (lost workers, files re-driven).
    """
    now = now or timezone.now()
    workers = registry()
    try:
        mark_gone_workers()  # a worker process of this host that is gone is lost now, not three beats later
        lost = workers.silent_for(lost_after_seconds())
    except Exception as exc:  # Redis is away: leases still expire, and the slow re-drive still runs
        log.warning("could not read the worker registry", extra={"error": str(exc)[:300]})
        return 0, 0
    redriven = 0
    if lost:
        redriven = _redrive_pending_before(now)
        log.warning("workers stopped beating: their files re-driven", extra={"count": len(lost), "redriven": redriven})
    for worker_id, last_beat in lost:
        files = _free_slots_of_worker(worker_id)
        if last_beat == GONE_BEAT and files:  # its process is known to be gone: none of its jobs is running
            try:
                _take_back_leases(files)
            except Exception as exc:  # the leases still run out by themselves
                log.warning("could not take back a gone worker's leases", extra={"error": str(exc)[:300]})
        try:
            workers.leave(worker_id)  # after the re-drive: a failed one is tried again next tick
        except Exception as exc:  # then it is re-driven again next tick: duplicates are harmless
            log.warning("could not forget a lost worker", extra={"error": str(exc)[:300]})
    return len(lost), redriven


def _redrive_pending_before(now: datetime, batch: int = 1000) -> int:
    """Every startable pending row last touched before `now` (each one touched as it goes, so batches end).

    A file waiting out a retry's backoff keeps its wait: its new job is due when
    the old one was (the lost worker may have held that delayed message too).
    """
    due = _retries_due_later(now)
    done = 0
    while True:
        ids = list(
            Attachment.objects.filter(status=Status.PENDING, uploaded_at__isnull=False, updated_at__lt=now)
            .exclude(lifecycle__in=[Lifecycle.DISCARDED, Lifecycle.DELETED])
            .order_by("pk")
            .values_list("pk", flat=True)[:batch]
        )
        for pk in ids:
            wait = due.get(str(pk))
            delay_ms = int((wait - now).total_seconds() * 1000) if wait is not None else 0
            attachment_requeue_intake(attachment_id=pk, now=now, delay_ms=max(0, delay_ms))
        done += len(ids)
        if len(ids) < batch:
            return done


def _retries_due_later(now: datetime) -> dict[str, datetime]:
    """Attachment id → when its latest delayed intake job is due, for the ones due after `now`."""
    from attachments.models import OutboxMessage

    longest = timedelta(seconds=settings.AIRLOCK_RETRIES.max_seconds * 1.5 + 60)  # backoff's jitter tops at 1.5×
    due: dict[str, datetime] = {}
    delayed_intakes = OutboxMessage.objects.filter(
        actor_name=INTAKE.actor_name, delay_ms__gt=0, created_at__gte=now - longest
    )
    for args, created_at, delay_ms in delayed_intakes.order_by("pk").values_list("args", "created_at", "delay_ms"):
        at = created_at + timedelta(milliseconds=delay_ms)
        if args and at > now:
            due[str(args[0])] = at
    return due


def pick_up_silent_uploads(*, now: datetime | None = None, limit: int = 100) -> int:
    """Intents whose bytes landed with no event (none configured, or it was lost, or a crash came first).

    Only intents whose upload URL may still have been used are looked at, newest
    first; older ones are `manage.py reconcile`'s job (it lists the bucket).
    """
    from attachments.storage import get_gateway
    from attachments.storage.base import StorageError
    from attachments.uploads.services.uploads import object_arrived

    # Also when bytes only come through our own PUT handler (local): it stores them before the
    # transaction that records them (attachments/uploads/services/uploads.py), and a crash in between
    # leaves an object that only this poll finds (a HEAD is a stat() there).
    gateway = get_gateway()
    now = now or timezone.now()
    window = timedelta(seconds=settings.AIRLOCK_URL_SECONDS.upload + 600)
    candidates = list(
        Attachment.objects.filter(
            status=Status.PENDING,
            uploaded_at__isnull=True,
            created_at__gte=now - window,
            lifecycle__in=[Lifecycle.STAGED, Lifecycle.COMMITTED],
        )
        .order_by("-created_at")
        .values_list("storage_key", flat=True)[:limit]
    )
    found = 0
    for key in candidates:
        try:
            info = gateway.head(key)
        except StorageError:
            continue
        if info is not None:
            arrival = object_arrived(
                key=key,
                size=info.size,
                source="reconcile",
                dedupe_key=f"poll:{key}:{info.etag or info.size}",
                event_name="ObjectCreated:Poll",
            )
            found += arrival.outcome == "started"
    return found


def recover(*, now: datetime | None = None) -> RecoveryReport:
    report = RecoveryReport(expired_leases=expire_leases(now=now), redriven=redrive_pending(now=now))
    report.lost_workers, report.redriven_after_loss = redrive_after_lost_workers(now=now)
    # After the two above, which read the waiting rooms to tell a parked job from a lost one.
    report.woken_after_expiry = wake_behind_expired_slots()
    report.relayed = outbox.relay_pending()
    report.silent_uploads = pick_up_silent_uploads(now=now)
    return report
