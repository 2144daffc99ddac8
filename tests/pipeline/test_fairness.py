"""Per-tenant concurrency on the heavy queue: one tenant's backlog does not starve another."""

import threading
import time

import pytest

from attachments.models import Attachment
from processing import pipeline
from tests.support import client_for, jpeg_bytes, upload, wait_for_status


@pytest.mark.django_db(transaction=True)
def test_one_tenants_backlog_does_not_starve_another(alice, mallory, live_worker, monkeypatch, settings):
    settings.AIRLOCK_CONCURRENCY = settings.AIRLOCK_CONCURRENCY.replace(tenant=1)

    def slow_derive(attachment):
        time.sleep(0.4)  # a heavy decode
        return pipeline.derive(attachment)

    monkeypatch.setitem(pipeline.WORK, "derive", slow_derive)
    backlog = [upload(client_for(alice), jpeg_bytes((64 + i, 64))) for i in range(10)]
    time.sleep(0.5)  # tenant A's jobs are queued first
    other = upload(client_for(mallory), jpeg_bytes((80, 60)))
    assert wait_for_status(other, ("ready",), timeout=60) == "ready"
    ahead = Attachment.objects.filter(pk__in=backlog, status="ready").count()
    # FIFO without the cap would finish most of A's ten first; with it B waits for at most a few.
    assert ahead <= 4, f"{ahead} of tenant A's files were ready before tenant B's one"
    assert [wait_for_status(i, ("ready",), timeout=60) for i in backlog] == ["ready"] * 10


@pytest.fixture
def fresh_slots(monkeypatch, settings):
    """Slots of this test only (Redis under a prefix of its own when the tests run on Redis)."""
    import uuid

    from attachments.shared_redis import backend_redis
    from processing import tenant_slots

    slots = (
        tenant_slots.RedisSlots(backend_redis(), f"{settings.AIRLOCK_KEY_PREFIX}-{uuid.uuid4().hex[:8]}")
        if settings.REDIS_URL
        else tenant_slots.MemorySlots()
    )
    monkeypatch.setattr(tenant_slots.backend, "value", slots)
    return slots


def _gate_tenant_at(stage: str, tenant_id: int, monkeypatch) -> tuple[threading.Event, list]:
    """Make `stage`'s work block for one tenant's files until the returned event is set; the list says who started."""
    gate, started = threading.Event(), []
    work = pipeline.WORK[stage]

    def gated(attachment):
        if attachment.tenant_id == tenant_id:
            started.append(attachment.pk)
            gate.wait(60)
        return work(attachment)

    monkeypatch.setitem(pipeline.WORK, stage, gated)
    if stage == "intake":
        monkeypatch.setattr(pipeline, "intake", gated)  # start_and_intake's run before the lease
    return gate, started


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("stage", ["intake", "derive"])  # before the lease, and a leased stage
def test_another_tenants_file_is_ready_while_a_backlog_holds_every_slot_at_a_stage(
    stage, alice, mallory, live_worker, fresh_slots, monkeypatch, settings
):
    """Tenant A's backlog is stuck at a stage; B's file passes it, and A's waiting jobs hold no thread.

    Without a cap at that stage, A's first jobs take all four worker threads and
    B's file waits behind the whole backlog (here: forever, until A's are let go).
    """
    from tests.faults.support import wait_until

    settings.AIRLOCK_CONCURRENCY = settings.AIRLOCK_CONCURRENCY.replace(tenant=2)
    # the tenant's pool alone: alice's files are all one subject's
    settings.AIRLOCK_CONCURRENCY = settings.AIRLOCK_CONCURRENCY.replace(subject=2)
    a_tenant = alice.membership.tenant_id
    gate, started = _gate_tenant_at(stage, a_tenant, monkeypatch)
    try:
        backlog = [upload(client_for(alice), jpeg_bytes((40 + i, 30))) for i in range(12)]
        wait_until(lambda: len(started) == 2, 30, f"tenant A's first two {stage} jobs")
        wait_until(
            lambda: len(fresh_slots.parked_files(str(a_tenant))) == 10, 30, f"the rest of A's backlog parked at {stage}"
        )
        other = upload(client_for(mallory), jpeg_bytes((80, 60)))
        assert wait_for_status(other, ("ready", "rejected", "failed"), timeout=20) == "ready"
        # B's file went first: not one of A's files is ready, and A never had more than its two slots' jobs running.
        assert Attachment.objects.filter(pk__in=backlog, status="ready").count() == 0
        assert len(started) == 2
    finally:
        gate.set()
    assert [wait_for_status(i, ("ready",), timeout=60) for i in backlog] == ["ready"] * 12
    assert fresh_slots.parked_files(str(a_tenant)) == set()


def _gate_subject_at(stage: str, subject: str, monkeypatch) -> tuple[threading.Event, list]:
    """Make `stage`'s work block for one subject's files until the returned event is set; the list says who started."""
    gate, started = threading.Event(), []
    work = pipeline.WORK[stage]

    def gated(attachment):
        if attachment.subject == subject:
            started.append(attachment.pk)
            gate.wait(60)
        return work(attachment)

    monkeypatch.setitem(pipeline.WORK, stage, gated)
    if stage == "intake":
        monkeypatch.setattr(pipeline, "intake", gated)  # start_and_intake's run before the lease
    return gate, started


@pytest.mark.django_db(transaction=True)
def test_one_subjects_flood_leaves_its_tenants_other_subjects_a_slot(
    alice, live_worker, fresh_slots, monkeypatch, settings
):
    """One service token, two of the host's people: a's 50 files cannot take every slot of the tenant.

    With the tenant's pool alone, a's first intake jobs (each one runs its scan)
    hold all of the tenant's slots and b's file waits behind the whole flood
    (here: until a's are let go). A subject's pool (tenant's 3 − 1 = 2 slots)
    leaves b one.
    """
    from processing.fairness import SUBJECT_POOL, subject_key
    from tests.faults.support import wait_until
    from tests.subjects.support import as_subject

    settings.AIRLOCK_CONCURRENCY = settings.AIRLOCK_CONCURRENCY.replace(tenant=3)
    # the default: the tenant's − 1 = 2
    settings.AIRLOCK_CONCURRENCY = settings.AIRLOCK_CONCURRENCY.replace(subject=None)
    tenant = str(alice.membership.tenant_id)
    gate, started = _gate_subject_at("intake", "flood-a", monkeypatch)
    try:
        flood = [upload(as_subject(alice, "flood-a"), jpeg_bytes((40 + i % 40, 30 + i // 40))) for i in range(50)]
        wait_until(lambda: len(started) == 2, 60, "the flood's first two intake jobs")
        parked = lambda: fresh_slots.parked_files(subject_key(tenant, "flood-a"), stage=SUBJECT_POOL)  # noqa: E731
        wait_until(lambda: len(parked()) >= 40, 60, "the flood parked in its subject's waiting room")
        other = upload(as_subject(alice, "other-b"), jpeg_bytes((80, 60)))
        assert wait_for_status(other, ("ready", "rejected", "failed"), timeout=30) == "ready"
        # b went first: not one of a's files is ready, and a never ran more than its two slots' jobs.
        assert Attachment.objects.filter(pk__in=flood, status="ready").count() == 0
        assert len(started) == 2
    finally:
        gate.set()
    assert [wait_for_status(i, ("ready",), timeout=120) for i in flood] == ["ready"] * 50
    assert fresh_slots.parked_files(subject_key(tenant, "flood-a"), stage=SUBJECT_POOL) == set()
    assert fresh_slots.parked_files(tenant) == set()
