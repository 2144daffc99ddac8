"""Per-tenant derive slots: park instead of retrying on a timer, resend when a slot frees."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from attachments.shared_redis import backend_redis
from processing import tenant_slots
from processing.tenant_slots import MemorySlots, RedisSlots


def _redis_slots(settings) -> RedisSlots:
    assert settings.REDIS_URL, "the redis-marked tests run with REDIS_URL (scripts/test)"
    return RedisSlots(backend_redis(), f"{settings.AIRLOCK_KEY_PREFIX}-{uuid.uuid4().hex[:8]}")


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def slots(request, settings):
    return MemorySlots() if request.param == "memory" else _redis_slots(settings)


def test_up_to_the_limit_then_parked_in_order(slots):
    opts = {"limit": 2, "ttl_ms": 60_000, "park_ttl_ms": 60_000}
    assert slots.acquire_or_park("t1", "h1", "job-1", **opts)
    assert slots.acquire_or_park("t1", "h2", "job-2", **opts)
    assert not slots.acquire_or_park("t1", "h3", "job-3", **opts)
    assert not slots.acquire_or_park("t1", "h4", "job-4", **opts)
    assert slots.acquire_or_park("t2", "h5", "other-tenant", **opts)  # another tenant has its own slots

    assert slots.release("t1", "h1") == "job-3"  # first parked, first resent
    assert slots.release("t1", "h2") == "job-4"
    assert slots.release("t1", "h3") is None
    assert slots.acquire_or_park("t1", "h6", "job-6", **opts)


def test_a_holder_that_never_releases_frees_its_slot_after_the_ttl(slots):
    opts = {"limit": 1, "park_ttl_ms": 60_000}
    assert slots.acquire_or_park("t", "crashed", "a", ttl_ms=50, **opts)
    assert not slots.acquire_or_park("t", "h2", "b", ttl_ms=50, **opts)
    time.sleep(0.12)
    assert slots.acquire_or_park("t", "h3", "c", ttl_ms=50, **opts)


def test_a_short_lived_holder_does_not_take_a_longer_lived_ones_slot_with_it(slots):
    """Stages sharing a pool hold slots for different times (on Redis the key's expiry was the last holder's)."""
    opts = {"limit": 2, "park_ttl_ms": 60_000}
    assert slots.acquire_or_park("t", "long", "a", ttl_ms=60_000, **opts)
    assert slots.acquire_or_park("t", "short", "b", ttl_ms=50, **opts)
    time.sleep(0.12)
    assert slots.acquire_or_park("t", "next", "c", ttl_ms=60_000, **opts)
    assert not slots.acquire_or_park("t", "over", "d", ttl_ms=60_000, **opts)  # "long" still holds its slot


def test_no_lost_wakeup_under_racing_threads(slots):
    """Every job is either run or parked and later popped: none is left waiting with no holder."""
    opts = {"limit": 2, "ttl_ms": 60_000, "park_ttl_ms": 60_000}
    ran: list[str] = []
    lock = threading.Lock()

    def job(name: str) -> None:
        holder = uuid.uuid4().hex
        if not slots.acquire_or_park("t", holder, name, **opts):
            return
        while name is not None:  # run it, then whatever the release hands over
            with lock:
                ran.append(name)
            name = slots.release("t", holder)
            if name is not None:
                holder = uuid.uuid4().hex
                if not slots.acquire_or_park("t", holder, name, **opts):
                    return

    threads = [threading.Thread(target=job, args=(f"job-{i}",)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(ran) == sorted(f"job-{i}" for i in range(40))


def test_parked_payloads_round_trip_and_garbage_is_refused():
    a, b = uuid.uuid4(), uuid.uuid4()
    assert tenant_slots.decode(tenant_slots.encode((a, b))) == (str(a), str(b))
    assert tenant_slots.decode("not json") is None
    assert tenant_slots.decode('{"a": 1}') is None
    assert tenant_slots.decode("[1, 2]") is None


@pytest.mark.django_db(transaction=True)
def test_a_parked_derive_job_is_resent_when_the_holder_finishes(alice, monkeypatch, settings):
    """The actor: a job over the cap leaves the queue, and the finishing job sends it again."""
    from django.utils import timezone

    from attachments.models import Attachment, Tenant
    from processing import actors, pipeline

    settings.AIRLOCK_CONCURRENCY = settings.AIRLOCK_CONCURRENCY.replace(tenant=1)
    now = timezone.now()
    monkeypatch.setattr(tenant_slots.backend, "value", MemorySlots())
    token = uuid.uuid4()
    # Both hold a derive lease (the actor takes no slot for a stale job).
    first, second = (
        Attachment.objects.create(
            tenant=Tenant.objects.get(slug="acme"),
            owner=alice,
            profile="image",
            filename=f"{n}.jpg",
            declared_size=1,
            declared_type="image/jpeg",
            storage_key=f"tenants/acme/{n}",
            created_at=now,
            expires_at=now,
            status="processing",
            lease_token=token,
            step="derive",
        )
        for n in ("a", "b")
    )
    sent: list[tuple] = []
    monkeypatch.setattr(actors.derive, "send", lambda *args: sent.append(args))
    inside: list[tuple] = []

    def run_stage(attachment_id, lease_token, step, *, attachment=None):
        if attachment_id == first.pk:
            # While the first job holds the only slot, the second arrives and is parked.
            actors.derive.fn(str(second.pk), str(token))
            inside.append(tuple(sent))
        return "advanced"

    monkeypatch.setattr(pipeline, "run_stage", run_stage)
    actors.derive.fn(str(first.pk), str(token))
    assert inside == [()]  # parked: not re-queued on a timer
    # Resent the moment the first released its slot, with its tenant (no read to park it again).
    # (The row has no subject: the tenant's pool alone, and a message as before subjects rode along.)
    assert sent == [(str(second.pk), str(token), str(second.tenant_id))]


def test_parked_files_lists_the_waiting_jobs_attachments(slots):
    opts = {"limit": 1, "ttl_ms": 60_000, "park_ttl_ms": 60_000}
    running, waiting = str(uuid.uuid4()), str(uuid.uuid4())
    token = str(uuid.uuid4())
    assert slots.acquire_or_park("t", tenant_slots.holder_name(running), tenant_slots.encode((running, token)), **opts)
    assert not slots.acquire_or_park(
        "t", tenant_slots.holder_name(waiting), tenant_slots.encode((waiting, token)), **opts
    )
    assert slots.parked_files("t") == {waiting}
    assert slots.parked_files("other") == set()


@pytest.mark.django_db
def test_the_lease_reconciler_keeps_a_parked_job_and_retries_a_lost_one(alice, api, monkeypatch, settings):
    """A long one-tenant backlog must not turn into retries (and, at the cap, failures)."""
    from datetime import timedelta

    from django.utils import timezone

    from attachments.models import Attachment
    from attachments.services.processing import attachment_begin
    from processing.recovery import expire_leases
    from tests.support import jpeg_bytes, upload

    slots = MemorySlots()
    monkeypatch.setattr(tenant_slots.backend, "value", slots)
    rows = []
    for _ in range(2):
        pk = uuid.UUID(upload(api(alice), jpeg_bytes((32, 24))))
        token = attachment_begin(attachment_id=pk)
        Attachment.objects.filter(pk=pk).update(step="derive")
        rows.append((pk, token))
    (parked_pk, parked_token), (lost_pk, lost_token) = rows
    tenant = str(Attachment.objects.get(pk=parked_pk).tenant_id)
    opts = {"limit": 1, "ttl_ms": 60_000, "park_ttl_ms": 60_000}
    assert slots.acquire_or_park(tenant, "someone-else/1", "x", **opts)
    assert not slots.acquire_or_park(
        tenant, tenant_slots.holder_name(parked_pk), tenant_slots.encode((parked_pk, parked_token)), **opts
    )

    later = timezone.now() + timedelta(seconds=settings.AIRLOCK_RETRIES.lease_seconds + 1)
    assert expire_leases(now=later, dry_run=True) == 1
    assert expire_leases(now=later) == 1
    parked, lost = Attachment.objects.get(pk=parked_pk), Attachment.objects.get(pk=lost_pk)
    assert (parked.status, parked.lease_token, parked.attempts) == ("processing", parked_token, 0)
    assert parked.lease_expires_at > later  # renewed, so the next tick leaves it alone too
    assert (lost.status, lost.attempts) == ("pending", 1)


def test_an_expired_holders_slot_gives_up_the_jobs_parked_behind_it_and_a_full_pool_none(slots):
    opts = {"limit": 2, "park_ttl_ms": 60_000}
    assert slots.acquire_or_park("t", "alive", "unused", ttl_ms=60_000, **opts)
    assert slots.acquire_or_park("t", "release-lost", "unused", ttl_ms=50, **opts)
    for job in ("job-1", "job-2"):
        assert not slots.acquire_or_park("t", f"h-{job}", job, ttl_ms=60_000, **opts)
    assert slots.pools_with_parked() == [("tenant", "t")]
    assert slots.wake_free("t", limit=2) == []  # both holders are live: nothing is freed
    time.sleep(0.12)
    assert slots.wake_free("t", limit=2) == ["job-1"]  # one slot free: the first parked job, one only
    assert slots.parked_files("t") == set() and slots.pools_with_parked() == [("tenant", "t")]
    assert slots.wake_free("t", limit=3) == ["job-2"]  # the limit given is the one counted against
    assert slots.pools_with_parked() == []


def test_acquire_without_parking_shares_the_pool_and_refuses_when_full(slots):
    """A web request's slot (a variant): the same pool as the jobs', refused instead of parked when full."""
    opts = {"limit": 2, "ttl_ms": 60_000}
    assert slots.acquire_or_park("t", "job", "parked-a", park_ttl_ms=60_000, **opts)
    assert slots.acquire("t", "variant-1", **opts)
    assert not slots.acquire("t", "variant-2", **opts)  # full: refused, and nothing joins the waiting room
    assert slots.parked_files("t") == set()
    assert slots.acquire("t2", "variant-3", **opts)  # another tenant's pool
    assert not slots.acquire_or_park("t", "job-2", '["parked-b"]', park_ttl_ms=60_000, **opts)
    assert slots.release("t", "variant-1") == '["parked-b"]'  # a variant's release hands over to the parked job
    assert slots.acquire("t", "variant-4", **opts)
