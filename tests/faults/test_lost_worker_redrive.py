"""A worker that dies says nothing: the reconciler notices it stopped beating and rebuilds its work.

What a SIGKILLed worker held: the leases of the jobs it ran (they expire; the
file's new job goes out at once), messages it had fetched from the broker and
not acked (invisible to us; Redis returns them minutes later), and derive
slots of its tenant with jobs parked behind them. Every pending file whose job
it may have held is re-driven once, a lease after its last beat; a healthy
backlog under a live worker is never re-driven. A live worker renews the
leases of the jobs it runs (and touches the file of an intake running before
its lease), so a long step is not taken for a lost one.
"""

from __future__ import annotations

import os
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from attachments.models import Attachment, OutboxMessage
from processing import liveness, pipeline, tenant_slots
from processing.recovery import expire_leases, recover, redrive_pending
from tests.support import client_for, jpeg_bytes, upload

from .support import StallingClamd, WorkerProcess, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def clean_broker():
    import dramatiq

    dramatiq.get_broker().flush_all()
    yield
    dramatiq.get_broker().flush_all()


@pytest.fixture
def registry():
    """This run's worker registry, emptied: beats of workers other tests killed are not this test's."""
    workers = liveness.registry()
    for worker_id, _ in workers.silent_for(-3600):
        workers.leave(worker_id)
    yield workers
    for worker_id, _ in workers.silent_for(-3600):
        workers.leave(worker_id)


def _intake_jobs(attachment_id: str) -> int:
    return OutboxMessage.objects.filter(actor_name="intake", args__0=attachment_id).count()


def test_a_silent_worker_has_every_pending_file_redriven_once(alice, registry):
    ids = [upload(client_for(alice), jpeg_bytes((100 + i, 80))) for i in range(3)]  # their jobs went out
    assert [_intake_jobs(pk) for pk in ids] == [1, 1, 1]
    registry.beat("alive", at=None)
    assert recover().lost_workers == 0  # everyone beat within the lease: nothing is touched
    assert [_intake_jobs(pk) for pk in ids] == [1, 1, 1]

    registry.beat("killed", at=0.0)  # last beat long ago: it may have held any of these jobs
    report = recover()
    assert (report.lost_workers, report.redriven_after_loss) == (1, 3)
    assert [_intake_jobs(pk) for pk in ids] == [2, 2, 2]
    assert all(m.delay_ms == 0 for m in OutboxMessage.objects.filter(actor_name="intake"))

    report = recover()  # once per lost worker, not every tick
    assert (report.lost_workers, report.redriven_after_loss) == (0, 0)
    assert [_intake_jobs(pk) for pk in ids] == [2, 2, 2]


def test_a_file_waiting_out_a_retry_backoff_keeps_its_wait(alice, registry, settings):
    from attachments.services.processing import attachment_retry_or_fail

    settings.AIRLOCK_RETRIES = settings.AIRLOCK_RETRIES.replace(base_seconds=60.0, max_seconds=600.0)
    attachment_id = upload(client_for(alice), jpeg_bytes())
    assert pipeline.start_and_intake(uuid.UUID(attachment_id)) == "advanced"
    row = Attachment.objects.get(pk=attachment_id)
    assert attachment_retry_or_fail(attachment_id=row.pk, token=row.lease_token, error="scanner down") == "retried"
    retry = OutboxMessage.objects.filter(actor_name="intake", args__0=attachment_id).latest("pk")
    assert retry.delay_ms >= 30_000  # 60 s ± 50 %

    registry.beat("killed", at=0.0)  # it may have held the delayed message: re-driven, due when that one was
    assert recover().redriven_after_loss == 1
    redriven = OutboxMessage.objects.filter(actor_name="intake", args__0=attachment_id).latest("pk")
    due = retry.created_at + timedelta(milliseconds=retry.delay_ms)
    assert redriven.pk != retry.pk
    left = (due - redriven.created_at).total_seconds() * 1000
    assert abs(redriven.delay_ms - left) < 2_000, (redriven.delay_ms, left)


def test_a_backlog_under_live_workers_is_not_redriven_tick_after_tick(alice, registry):
    ids = [upload(client_for(alice), jpeg_bytes((100 + i, 80))) for i in range(20)]
    for _ in range(5):
        registry.beat("alive")
        report = recover()
        assert (report.lost_workers, report.redriven_after_loss, report.redriven) == (0, 0, 0)
    assert OutboxMessage.objects.filter(actor_name="intake").count() == len(ids)


def test_an_expired_lease_sends_the_new_job_at_once(alice, settings):
    attachment_id = upload(client_for(alice), jpeg_bytes())
    pipeline.start_and_intake(uuid.UUID(attachment_id))  # the worker took it... and died
    later = timezone.now() + timedelta(seconds=settings.AIRLOCK_RETRIES.lease_seconds + 1)
    assert expire_leases(now=later) == 1
    retry = OutboxMessage.objects.filter(actor_name="intake", args__0=attachment_id).order_by("-pk").first()
    assert retry is not None and retry.delay_ms == 0  # the lease already waited; no backoff on top


def _at_derive(client) -> Attachment:
    attachment_id = upload(client, jpeg_bytes((320, 240)))
    assert pipeline.start_and_intake(uuid.UUID(attachment_id)) == "advanced"  # intake runs the scan
    row = Attachment.objects.get(pk=attachment_id)
    assert (row.status, row.step) == ("processing", "derive")
    return row


def test_a_dead_derive_job_hands_its_slot_to_the_job_parked_behind_it(alice, settings):
    dead, parked = _at_derive(client_for(alice)), _at_derive(client_for(alice))
    tenant = str(dead.tenant_id)
    slots = tenant_slots.backend()
    opts = {"limit": 1, "ttl_ms": 600_000, "park_ttl_ms": 600_000}
    assert slots.acquire_or_park(tenant, tenant_slots.holder_name(dead.pk), "unused", **opts)  # then SIGKILL
    payload = tenant_slots.encode((parked.pk, parked.lease_token, tenant, parked.subject))
    assert not slots.acquire_or_park(tenant, tenant_slots.holder_name(parked.pk), payload, **opts)

    Attachment.objects.filter(pk=dead.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert expire_leases() == 1
    assert Attachment.objects.get(pk=dead.pk).status == "pending"
    # The job parked behind the dead one is sent again now, not when its waiting list expires.
    assert (
        OutboxMessage.objects.filter(
            actor_name="derive", args=[str(parked.pk), str(parked.lease_token), tenant, parked.subject]
        ).count()
        == 2
    )
    assert slots.parked_files(tenant) == set()
    assert slots.holders_of(tenant, str(dead.pk)) == []


@pytest.mark.redis
def test_a_live_worker_keeps_a_long_scans_file_and_its_kill_is_noticed(alice, tmp_path, short_tmp, registry, settings):
    """Intake runs the scan before it takes a lease: while it runs, the worker's beat touches the pending file
    (as it renews a lease), so the reconciler does not take its job for lost; once killed, the file is re-driven."""
    settings.AIRLOCK_RETRIES = settings.AIRLOCK_RETRIES.replace(lease_seconds=2)
    clamd = StallingClamd(short_tmp / "stall.sock")  # the scan step never ends while the worker lives
    worker = WorkerProcess(
        tmp_path, env={"CLAMD_SOCKET": str(clamd.path), "CLAMD_HOST": None, "AIRLOCK_RETRIES": {"lease_seconds": 2}}
    ).start()
    try:
        attachment_id = upload(client_for(alice), jpeg_bytes((640, 480)))
        assert clamd.received.wait(60), f"the worker never streamed the file to clamd\n{worker.log()}"
        first = Attachment.objects.get(pk=attachment_id).updated_at
        wait_until(
            lambda: Attachment.objects.get(pk=attachment_id).updated_at > first + timedelta(seconds=1),
            30,
            f"the running intake's file to be touched\n{worker.log()}",
        )
        row = Attachment.objects.get(pk=attachment_id)
        assert (row.status, row.lease_token) == ("pending", None)
        # Looked at a moment after that touch, the file is not one whose job went missing.
        assert redrive_pending(now=row.updated_at + timedelta(seconds=0.5), older_than_seconds=1) == 0
        assert recover().lost_workers == 0
        assert _intake_jobs(attachment_id) == 1
        worker.kill()
    finally:
        worker.kill()
        clamd.close()

    def noticed():
        report = recover()
        return report if report.lost_workers else None

    report = wait_until(noticed, 30, "the killed worker to be noticed", interval=0.2)
    assert report.lost_workers == 2  # its process is gone: both its workers (the stages', the transcodes') at once
    assert report.redriven_after_loss >= 1
    row = Attachment.objects.get(pk=attachment_id)
    assert (row.status, row.attempts) == ("pending", 0)
    assert _intake_jobs(attachment_id) == 2


def test_a_lost_worker_gives_back_every_derive_slot_it_held(alice, registry):
    """Even one whose job was stale or a duplicate: its file's lease says nothing about that slot."""
    waiting = _at_derive(client_for(alice))
    tenant = str(waiting.tenant_id)
    slots = tenant_slots.backend()
    opts = {"limit": 1, "ttl_ms": 600_000, "park_ttl_ms": 600_000}
    assert slots.acquire_or_park(tenant, f"{uuid.uuid4()}/0123456789ab@killed", "unused", **opts)  # a stale job
    payload = tenant_slots.encode((waiting.pk, waiting.lease_token, tenant, waiting.subject))
    assert not slots.acquire_or_park(tenant, tenant_slots.holder_name(waiting.pk), payload, **opts)
    registry.beat("alive")
    assert recover().lost_workers == 0
    assert slots.holders_of_worker("killed") != []

    registry.beat("killed", at=0.0)
    assert recover().lost_workers == 1
    assert slots.holders_of_worker("killed") == []
    assert (
        OutboxMessage.objects.filter(
            actor_name="derive", args=[str(waiting.pk), str(waiting.lease_token), tenant, waiting.subject]
        ).count()
        == 2
    )
    assert slots.parked_files(tenant) == set()


@pytest.mark.redis
def test_a_worker_whose_process_is_gone_is_lost_at_once_its_slot_freed_and_file_redriven(
    alice, tmp_path, short_tmp, registry, settings
):
    """Seen from its own host, a killed worker is lost at the next tick, not three beats (or a lease) later."""
    # three missed beats: 46 s; the lease: 5 minutes
    settings.AIRLOCK_RETRIES = settings.AIRLOCK_RETRIES.replace(lease_seconds=300)
    clamd = StallingClamd(short_tmp / "stall.sock")
    worker = WorkerProcess(
        tmp_path, env={"CLAMD_SOCKET": str(clamd.path), "CLAMD_HOST": None, "AIRLOCK_RETRIES": {"lease_seconds": 300}}
    ).start()
    try:
        attachment_id = upload(client_for(alice), jpeg_bytes((640, 480)))
        assert clamd.received.wait(60), f"the worker never streamed the file to clamd\n{worker.log()}"
        ids = [w for w in registry.members() if w.split(":")[1:2] == [str(worker.pid)]]
        assert len(ids) == 2, registry.members()  # the process's stages worker and transcodes worker
        assert not any(liveness.process_gone(worker_id) for worker_id in ids)
        held = [h for worker_id in ids for _, _, h in tenant_slots.backend().holders_of_worker(worker_id)]
        assert [holder.partition("/")[0] for holder in held] == [attachment_id]
        assert recover().lost_workers == 0
    finally:
        worker.kill()
        clamd.close()

    assert all(liveness.process_gone(worker_id) for worker_id in ids)
    report = recover()  # at once: no beat was missed yet, no lease ran out
    assert report.lost_workers == 2
    assert all(tenant_slots.backend().holders_of_worker(worker_id) == [] for worker_id in ids)
    assert not set(ids) & set(registry.members())
    row = Attachment.objects.get(pk=attachment_id)
    # Killed mid-scan, which intake runs before its lease: the file is pending, no attempt spent, re-driven now.
    assert (row.status, row.attempts, row.lease_token) == ("pending", 0, None)
    assert _intake_jobs(attachment_id) == 2
    retry = OutboxMessage.objects.filter(actor_name="intake", args__0=attachment_id).latest("pk")
    assert retry.delay_ms == 0


def test_a_worker_of_another_host_or_a_live_process_is_not_taken_for_gone():
    assert liveness.process_gone(liveness.new_worker_id()) is False  # this very process
    assert liveness.process_gone(f"elsewhere.1:{os.getpid() + 1}:abc") is False  # another pid space: unknown
    assert liveness.process_gone("0123456789abcdef") is False  # an id without a pid (unknown pid space)
    parent = os.getppid()
    assert liveness.process_gone(f"{liveness.pid_space()}:{parent}:abc") is False
