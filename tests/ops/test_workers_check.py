"""/readyz's workers check: a shared broker with files waiting and no worker beating is not ready."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from attachments.models import Attachment
from ops import health
from processing import liveness
from tests.support import jpeg_bytes, upload

pytestmark = pytest.mark.django_db


@pytest.fixture
def shared_broker_registry(monkeypatch):
    """A registry of this test's own, on a broker that is shared (as with Redis)."""
    registry = liveness.MemoryRegistry()
    monkeypatch.setattr(liveness.registry, "value", registry)
    monkeypatch.setattr(health, "broker_kind", lambda: "redis")
    return registry


def _waiting_file(alice, api) -> str:
    attachment_id = upload(api(alice), jpeg_bytes((120, 90)))
    late = timezone.now() - timedelta(seconds=liveness.lost_after_seconds() + 5)
    Attachment.objects.filter(pk=attachment_id).update(uploaded_at=late)
    return attachment_id


def test_files_waiting_and_no_worker_beating_fail_the_check(alice, api, shared_broker_registry):
    _waiting_file(alice, api)
    shared_broker_registry.beat("dead", at=0.0)
    with pytest.raises(RuntimeError, match=r"no worker is consuming \(1 files waiting\)"):
        health.check_workers()


def test_a_worker_beating_passes_the_check(alice, api, shared_broker_registry):
    _waiting_file(alice, api)
    shared_broker_registry.beat("alive")
    assert health.check_workers() == {"state": "ok"}


def test_no_worker_and_nothing_waiting_is_ready(alice, api, shared_broker_registry):
    upload(api(alice), jpeg_bytes((120, 90)))  # just arrived: no worker could have taken it yet
    assert health.check_workers() == {"state": "ok"}


@pytest.mark.django_db(transaction=True)  # the checks run in threads of their own: they see committed rows
def test_readyz_names_the_workers_check(client, alice, api, shared_broker_registry):
    _waiting_file(alice, api)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert "no worker is consuming" in response.json()["checks"]["workers"]["error"]


def test_a_worker_is_taken_for_dead_after_three_missed_beats_not_a_lease(settings):
    settings.AIRLOCK_RETRIES = settings.AIRLOCK_RETRIES.replace(lease_seconds=300)
    assert liveness.beat_seconds() == 15
    assert liveness.lost_after_seconds() == 46
    settings.AIRLOCK_RETRIES = settings.AIRLOCK_RETRIES.replace(lease_seconds=8)
    assert liveness.lost_after_seconds() == 7
