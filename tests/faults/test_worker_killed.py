"""kill -9 of a worker process mid-scan and mid-thumbnail: the reconciler re-drives the file.

A real worker runs in its own process (tests/faults/worker.py) on Redis against
the test database. The step is made to block deterministically: mid-scan by a
clamd that reads the stream and never answers, mid-thumbnail by a sandbox job
that sleeps. The worker is then SIGKILLed (no cleanup code runs); mid-thumbnail
the lease is expired by passing a later `now` to the reconciler (no sleeping),
mid-scan (intake's, before any lease) the reconciler re-drives the pending file
of a worker it finds gone; a new worker takes the file to ready. Throughout, nobody but the uploader can read it.
"""

from __future__ import annotations

import os
from datetime import timedelta

import dramatiq
import pytest
from django.conf import settings
from django.utils import timezone

from attachments.models import Attachment, TransitionLog
from attachments.services.audit import AUDIT_EVENTS
from processing.recovery import expire_leases, recover
from tests.support import client_for, jpeg_bytes, upload, wait_for_status

from .support import (
    StallingClamd,
    WorkerProcess,
    assert_not_served,
    assert_ready_and_complete,
    assert_served_intact,
    descendants,
    wait_gone,
    wait_until,
)

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def clean_broker():
    broker = dramatiq.get_broker()
    broker.flush_all()
    yield broker
    broker.flush_all()


def _real_scanner_env() -> dict[str, str | None]:
    """What the replacement worker scans with: the configured clamd (CI) or YARA alone."""
    return {"CLAMD_SOCKET": os.environ.get("CLAMD_SOCKET"), "CLAMD_HOST": os.environ.get("CLAMD_HOST")}


def _recover_and_finish(attachment_id: str, tmp_path, bob, mallory) -> None:
    row = Attachment.objects.get(pk=attachment_id)
    assert row.status == "processing", "a dead worker's file stays processing until its lease expires"
    # The lease is still valid: the reconciler must not steal it from a worker that may be alive.
    assert expire_leases() == 0
    assert Attachment.objects.get(pk=attachment_id).lease_token == row.lease_token

    later = timezone.now() + timedelta(seconds=settings.AIRLOCK_RETRIES.lease_seconds + 1)
    assert expire_leases(now=later) == 1
    assert _tenant_slots_held(attachment_id) == 0  # a dead derive's slot is given back with its lease
    row = Attachment.objects.get(pk=attachment_id)
    assert (row.status, row.attempts, row.lease_token) == ("pending", 1, None)
    assert_not_served(attachment_id, bob, mallory)

    transitions = _finished_by_a_fresh_worker(attachment_id, tmp_path, bob, mallory)
    assert transitions == [
        ("start", "worker"),
        ("retry", "system:reconciler"),
        ("start", "worker"),
        ("finish", "worker"),
    ]


def _finished_by_a_fresh_worker(attachment_id, tmp_path, bob, mallory) -> list[tuple[str, str]]:
    """A new worker takes the file to ready, intact and served only to its owner; its transitions, audit aside."""
    worker = WorkerProcess(tmp_path, env=_real_scanner_env()).start()
    try:
        assert wait_for_status(attachment_id, timeout=90) == "ready", worker.log()
    finally:
        worker.stop()
    assert_ready_and_complete(attachment_id)
    assert_served_intact(attachment_id, bob)
    assert_not_served(attachment_id, mallory)
    return list(
        TransitionLog.objects.filter(attachment_id=attachment_id)
        .exclude(transition__in=AUDIT_EVENTS)
        .values_list("transition", "actor")
    )


def test_sigkill_mid_scan_is_recovered_once_the_worker_is_noticed_gone(
    alice, bob, mallory, tmp_path, short_tmp, clean_broker
):
    """Intake runs the scan before it takes the lease (local uploads are write-once): killed mid-scan, the file
    is still pending with no attempt spent, and the reconciler re-drives it once it sees the worker gone."""
    clamd = StallingClamd(short_tmp / "stall.sock")
    worker = WorkerProcess(tmp_path, env={"CLAMD_SOCKET": str(clamd.path), "CLAMD_HOST": None}).start()
    try:
        attachment_id = upload(client_for(alice), jpeg_bytes((640, 480)))
        assert clamd.received.wait(60), f"the worker never streamed the file to clamd\n{worker.log()}"
        row = Attachment.objects.get(pk=attachment_id)
        assert (row.status, row.lease_token, row.scanned_at) == ("pending", None, None)
        assert_not_served(attachment_id, bob, mallory)
        worker.kill()
    finally:
        worker.kill()
        clamd.close()
    assert_not_served(attachment_id, bob, mallory)
    assert expire_leases() == 0  # no lease to run out
    report = recover()  # the killed worker's process is gone: its pending files get a new intake job
    assert report.lost_workers >= 1 and report.redriven_after_loss >= 1
    row = Attachment.objects.get(pk=attachment_id)
    assert (row.status, row.attempts, row.lease_token) == ("pending", 0, None)
    assert_not_served(attachment_id, bob, mallory)

    transitions = _finished_by_a_fresh_worker(attachment_id, tmp_path, bob, mallory)
    assert transitions == [("start", "worker"), ("finish", "worker")]  # no attempt spent on the kill


def test_sigkill_mid_thumbnail_is_recovered_and_leaves_no_sandbox_behind(alice, bob, mallory, tmp_path, clean_broker):
    marker = tmp_path / "derive-started"
    worker = WorkerProcess(
        tmp_path, env={"AIRLOCK_FAULT_STALL": "derive", "AIRLOCK_FAULT_MARKER": str(marker), **_real_scanner_env()}
    ).start()
    try:
        attachment_id = upload(client_for(alice), jpeg_bytes((1600, 1200)))
        wait_until(marker.exists, 90, f"the derive step to start\n{worker.log()}")
        row = Attachment.objects.get(pk=attachment_id)
        assert (row.status, row.step) == ("processing", "derive")
        # The fork server and the (sleeping) job it forked are the worker's descendants.
        sandbox = wait_until(
            lambda: descendants(worker.pid) if len(descendants(worker.pid)) >= 2 else None,
            30,
            "the sandbox job process",
        )
        assert_not_served(attachment_id, bob, mallory)
        worker.kill()
    finally:
        worker.kill()
    # The sandbox's lifeline: when the worker dies, its fork server kills the job and exits.
    assert wait_gone(sandbox) == set(), "sandbox processes outlived their worker"
    assert not Attachment.objects.get(pk=attachment_id).derivatives.exists()
    assert _tenant_slots_held(attachment_id) == 1  # the dead job's slot: freed by the reconciler below
    assert_not_served(attachment_id, bob, mallory)
    _recover_and_finish(attachment_id, tmp_path, bob, mallory)


def _tenant_slots_held(attachment_id: str) -> int:
    """How many derive slots of its tenant are held in this file's name (the worker shares our key prefix)."""
    import redis

    tenant_id = Attachment.objects.get(pk=attachment_id).tenant_id
    client = redis.Redis.from_url(settings.REDIS_URL)
    members = client.zrange(f"{settings.AIRLOCK_KEY_PREFIX}-tenant-slots-{tenant_id}", 0, -1)
    return sum(1 for m in members if m.decode().startswith(f"{attachment_id}/"))
