"""Storage deletes failing during a sweep: retried, dead-lettered at the cap, nothing still stored marked deleted.

The sweeper's own service (sweeper.sweep.sweep_expired) runs against the real
local storage wrapped in a gateway that fails on cue: a full outage, random
failures, and "lost replies" (the object is gone but the call errors, as when
a delete times out after S3 did it).
"""

from __future__ import annotations

import random
import threading
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from attachments.models import Attachment, DeadLetter, Derivative, Lifecycle, Status
from attachments.naming import derivative_key, original_key
from attachments.storage import get_gateway
from attachments.storage.base import StorageError
from sweeper import reaping
from sweeper.locks import make_lock
from sweeper.sweep import sweep_expired

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
NOW = T0 + timedelta(days=8)  # past the 7-day staged TTL
TICK = timedelta(minutes=30)


class FailingGateway:
    """The real gateway, with deletes that fail on cue (thread-safe: the sweep deletes in a pool)."""

    name = "failing"

    def __init__(self, inner, *, seed: int = 0) -> None:
        self.inner = inner
        self.down = False
        self.fail_rate = 0.0
        self.lost_reply_rate = 0.0
        self.always_fail: set[str] = set()
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.calls = 0

    def delete(self, key: str) -> bool:
        with self.lock:
            self.calls += 1
            roll = self.rng.random()
        if self.down:
            raise StorageError("storage unavailable (503)")
        if key in self.always_fail:
            raise StorageError(f"AccessDenied on {key}")
        if roll < self.fail_rate:
            raise StorageError("InternalError (500)")
        if roll < self.fail_rate + self.lost_reply_rate:
            self.inner.delete(key)
            raise StorageError("read timeout after the delete was sent")
        return self.inner.delete(key)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


def _row(owner, *, lifecycle: str = Lifecycle.STAGED, expires_at: datetime | None = T0 + timedelta(days=7)):
    """A ready upload as the pipeline leaves it: original, sanitized copy, thumbnail, all in storage."""
    tenant = owner.membership.tenant
    pk = uuid.uuid4()
    key = original_key(tenant_slug=tenant.slug, profile="image", attachment_id=pk)
    served = derivative_key(tenant_slug=tenant.slug, attachment_id=pk, kind="sanitized", ext="jpg")
    thumb = derivative_key(tenant_slug=tenant.slug, attachment_id=pk, kind="thumbnail", ext="webp")
    row = Attachment.objects.create(
        id=pk,
        tenant=tenant,
        owner=owner,
        profile="image",
        status=Status.READY,
        filename="a.jpg",
        declared_size=4,
        declared_type="image/jpeg",
        storage_key=key,
        served_key=served,
        created_at=T0,
        uploaded_at=T0,
        ready_at=T0,
        lifecycle=lifecycle,
        expires_at=expires_at,
        committed_at=T0 if lifecycle == Lifecycle.COMMITTED else None,
        ref="listing:1" if lifecycle == Lifecycle.COMMITTED else None,
    )
    Derivative.objects.create(attachment=row, kind="thumbnail", storage_key=thumb, content_type="image/webp", size=4)
    gateway = get_gateway()
    for k in (key, served, thumb):
        gateway.write_chunks(k, [b"data"])
    return row


def _keys(row: Attachment) -> list[str]:
    keys = [k for k in (row.storage_key, row.served_key, row.quarantine_key) if k]
    return keys + list(Derivative.objects.filter(attachment_id=row.pk).values_list("storage_key", flat=True))


def _stored(keys) -> set[str]:
    gateway = get_gateway()
    return {k for k in keys if gateway.head(k) is not None}


def _check_invariants(cap: int) -> None:
    """After any sweep: a row marked deleted has no object left; every other row is accounted for."""
    for row in Attachment.objects.all():
        left = _stored(_keys(row))
        if row.lifecycle == Lifecycle.DELETED:
            assert not left, f"{row.pk} marked deleted but {left} still stored"
            assert row.deleted_at is not None
        elif row.delete_attempts >= cap:
            assert DeadLetter.objects.filter(kind="sweep", attachment_id=row.pk).count() == 1
        assert row.delete_attempts <= cap


def _sweep(gateway, now: datetime):
    return sweep_expired(now=now, gateway=gateway, lock=make_lock(f"fault-sweep-{uuid.uuid4().hex}"), trigger="test")


def test_outage_then_flaky_storage_retries_dead_letters_and_never_marks_stored_rows_deleted(alice, monkeypatch):
    monkeypatch.setattr(reaping, "DELETE_ATTEMPTS", cap := 4)
    expired = [_row(alice) for _ in range(40)]
    committed = [_row(alice, lifecycle=Lifecycle.COMMITTED, expires_at=None) for _ in range(5)]
    live = [_row(alice, expires_at=NOW + timedelta(days=3)) for _ in range(5)]
    gateway = FailingGateway(get_gateway(), seed=20261130)

    gateway.down = True
    report = _sweep(gateway, NOW)
    assert (report.selected, report.deleted, report.errors) == (40, 0, 40)
    assert not Attachment.objects.filter(lifecycle=Lifecycle.DELETED).exists()
    assert all(_stored(_keys(row)) == set(_keys(row)) for row in expired), "an outage deletes nothing"
    assert set(Attachment.objects.filter(pk__in=[r.pk for r in expired]).values_list("delete_attempts", flat=True)) == {
        1
    }
    _check_invariants(cap)

    gateway.down = False
    gateway.fail_rate, gateway.lost_reply_rate = 0.2, 0.1
    now = NOW
    for _ in range(cap + 2):  # bounded: every row is done or dead-lettered within the cap
        now += TICK
        _sweep(gateway, now)
        _check_invariants(cap)
    rows = {r.pk: r for r in Attachment.objects.filter(pk__in=[r.pk for r in expired])}
    deleted = [r for r in rows.values() if r.lifecycle == Lifecycle.DELETED]
    dead = [r for r in rows.values() if r.lifecycle != Lifecycle.DELETED]
    assert deleted and dead, "the seed gives both outcomes"
    assert all(r.delete_attempts == cap and r.delete_error for r in dead)
    letters = DeadLetter.objects.filter(kind="sweep")
    assert letters.count() == len(dead)
    for letter in letters:
        assert letter.payload["attempts"] == cap and set(letter.payload["failed_keys"]) <= set(letter.payload["keys"])

    # Storage healthy again: dead-lettered rows wait for a human, they are not retried forever.
    gateway.fail_rate = gateway.lost_reply_rate = 0.0
    report = _sweep(gateway, now + TICK)
    assert report.selected == 0
    # Committed and still-live uploads were never touched.
    for row in committed + live:
        fresh = Attachment.objects.get(pk=row.pk)
        assert fresh.lifecycle == row.lifecycle and fresh.delete_attempts == 0
        assert _stored(_keys(fresh)) == set(_keys(fresh))


def test_one_undeletable_object_keeps_its_row_until_a_human_looks(alice, monkeypatch):
    monkeypatch.setattr(reaping, "DELETE_ATTEMPTS", cap := 3)
    row = _row(alice)
    thumb = Derivative.objects.get(attachment=row).storage_key
    gateway = FailingGateway(get_gateway())
    gateway.always_fail = {thumb}
    now = NOW
    for attempt in range(1, cap + 2):
        report = _sweep(gateway, now)
        fresh = Attachment.objects.get(pk=row.pk)
        assert fresh.lifecycle == Lifecycle.STAGED, "a row whose objects are not all gone is never deleted"
        assert fresh.delete_attempts == min(attempt, cap)
        assert report.dead_lettered == (1 if attempt == cap else 0)
        assert _stored(_keys(fresh)) == {thumb}  # the others went on the first try and stay gone
        now += TICK
    letter = DeadLetter.objects.get(kind="sweep", attachment=row)
    assert letter.payload["failed_keys"] == [thumb] and "AccessDenied" in letter.last_error
