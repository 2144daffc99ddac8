"""Shared fixtures: users in tenants, API clients, storage per test, running the pipeline."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from django.db import connection

from tests.sandbox import jobkinds
from tests.support import EICAR, client_for, create_intent, jpeg_bytes, pdf_bytes, png_bytes, zip_bytes
from tests.support.processes import PrivateClamd

# The tests' misbehaving job kinds (tests/sandbox/jobkinds.py), here and in every fork
# server this process starts; a worker process a test starts installs them itself.
jobkinds.install()


@pytest.fixture(autouse=True)
def storage_root(tmp_path, settings):
    """Every test gets its own local storage root (S3 tests switch the backend themselves)."""
    from attachments.storage import reset_gateway

    settings.AIRLOCK_STORAGE = "local"
    settings.AIRLOCK_STORAGE_ROOT = tmp_path / "storage"
    reset_gateway()
    yield settings.AIRLOCK_STORAGE_ROOT
    reset_gateway()


@pytest.fixture(autouse=True)
def _jobs_sent_by_this_process():
    """A command run in a test may leave its jobs for serve's relay (attachments/services/handoff.py): not the next
    test's."""
    from attachments.services import outbox

    yield
    outbox.relay_elsewhere(False)


@pytest.fixture(autouse=True)
def _sent_marks_at_once():
    """Each job is marked sent as it is sent: the bulk marks' timer thread would write from its own connection, racing
    the test's transaction (tests/pipeline/test_outbox_marks.py turns them on). Not through the test's monkeypatch,
    which a test may undo() half-way."""
    from attachments.services import outbox

    outbox.SENT_MARK_DELAY_S = 0


@pytest.fixture(autouse=True)
def _solo_rerun_lock_of_this_test(tmp_path, monkeypatch):
    """Each test's solo re-runs (processing/sandbox/solo.py) have a lock and a spacing of their own."""
    from processing.sandbox import solo

    monkeypatch.setattr(solo, "LOCK_PATH", tmp_path / "solo.lock")


@pytest.fixture(autouse=True)
def _clear_cache():
    from django.conf import settings
    from django.core.cache import cache

    prefix = settings.CACHES["default"].get("KEY_PREFIX")
    if settings.REDIS_URL and prefix:
        # cache.clear() is FLUSHDB on Redis: it would also wipe the broker queues and
        # locks of every other run sharing this Redis. Delete only this run's keys.
        client = cache._cache.get_client(write=True)
        for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            client.delete(key)
    else:
        cache.clear()
    yield


@pytest.fixture(autouse=True)
def _readyz_computed_at_each_call(monkeypatch):
    """/readyz reuses one answer for a second in production: a test that changes a dependency and asks
    again must see the change (tests/ops/test_readyz_single_flight.py puts the second back)."""
    from ops import health

    monkeypatch.setattr(health, "REUSE_SECONDS", 0.0)
    health.forget_readiness()
    yield
    health.forget_readiness()


@pytest.fixture(autouse=True)
def _no_ref_holds_cached():
    """A ref hold a previous test set (and rolled back) must not linger in the process's cache."""
    from attachments.selectors import forget_ref_holds

    forget_ref_holds()
    yield


@pytest.fixture(autouse=True)
def _webhook_endpoints_unknown_to_this_test():
    """Every test starts with no webhook endpoint: say so to the process's endpoint cache.

    An endpoint a previous test created (and rolled back) must not linger in it,
    and a transition must not pay a query to find that nobody listens.
    """
    from webhooks.services.endpoints import prime_empty

    prime_empty()
    yield


@pytest.fixture
def make_user(db) -> Callable:
    from django.contrib.auth import get_user_model

    from attachments.models import Membership, Tenant
    from attachments.services.tokens import api_token_issue

    def make(name: str | None = None, *, tenant: str = "acme", staff: bool = False):
        name = name or f"user-{uuid.uuid4().hex[:8]}"
        tenant_obj, _ = Tenant.objects.get_or_create(slug=tenant, defaults={"name": tenant})
        user = get_user_model().objects.create_user(username=name, password="pw-" + name, is_staff=staff)
        Membership.objects.create(user=user, tenant=tenant_obj)
        user.api_token = api_token_issue(user=user)
        return user

    return make


@pytest.fixture
def alice(make_user):
    return make_user("alice", tenant="acme")


@pytest.fixture
def bob(make_user):
    """Same tenant as alice."""
    return make_user("bob", tenant="acme")


@pytest.fixture
def mallory(make_user):
    """Another tenant."""
    return make_user("mallory", tenant="evil")


@pytest.fixture
def acme_behind(alice, settings):
    """Five of acme's uploads have waited past AIRLOCK_MAX_BACKLOG_SECONDS: its new uploads are refused.

    The workers are there, only behind: one beats (on a shared broker, files waiting with no worker
    beating would be a different outage, /readyz's `workers` check).
    """
    from datetime import timedelta

    from django.utils import timezone

    from attachments.models import Attachment, Status
    from attachments.services import backlog
    from processing import liveness

    settings.AIRLOCK_MAX_BACKLOG_SECONDS = 60
    late = timezone.now() - timedelta(seconds=300)
    for _ in range(backlog.QUEUE_DEPTH):
        pk = create_intent(client_for(alice), size=10).json()["id"]
        Attachment.objects.filter(pk=pk).update(status=Status.PENDING, uploaded_at=late)
    worker = liveness.new_worker_id()
    liveness.registry().beat(worker)
    backlog.forget()
    yield
    backlog.forget()
    liveness.registry().leave(worker)


@pytest.fixture
def api() -> Callable:
    return client_for


@pytest.fixture
def live_worker(transactional_db):
    """A real Dramatiq worker on the configured broker (Redis in CI), plus the outbox relay."""
    import dramatiq

    from ops.runtime import start_worker

    broker = dramatiq.get_broker()
    broker.flush_all()
    worker = start_worker(threads=4)
    yield worker
    worker.stop(timeout=10_000)
    broker.flush_all()
    connection.close()


@pytest.fixture
def samples():
    class Samples:
        jpeg = staticmethod(jpeg_bytes)
        png = staticmethod(png_bytes)
        pdf = staticmethod(pdf_bytes)
        zip = staticmethod(zip_bytes)
        eicar = EICAR

    return Samples


@pytest.fixture
def private_clamd() -> Iterator[PrivateClamd]:
    """A clamd of this test's own, which it may stop and start without touching anybody else's."""
    clamd = PrivateClamd()
    clamd.start()
    try:
        yield clamd
    finally:
        clamd.remove()
