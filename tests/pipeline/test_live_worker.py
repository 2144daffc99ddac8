"""End to end with a real Dramatiq worker on the configured broker (Redis in CI)."""

import pytest

from attachments.models import Attachment
from attachments.services.audit import AUDIT_EVENTS
from tests.support import client_for, create_intent, jpeg_bytes, put_bytes, wait_for_status


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_upload_is_processed_by_the_worker_and_downloadable(alice, live_worker, settings):
    import dramatiq

    assert settings.REDIS_URL, "CI runs this against Redis: set REDIS_URL"
    assert type(dramatiq.get_broker()).__name__ == "RedisBroker"
    client = client_for(alice)
    data = jpeg_bytes((300, 200))
    intent = create_intent(client, size=len(data)).json()
    assert put_bytes(intent["upload"]["url"], data).status_code == 202
    assert wait_for_status(intent["id"], timeout=60) == "ready"
    response = client.get(f"/api/v1/attachments/{intent['id']}/download")
    assert response.status_code == 200
    assert Attachment.objects.get(pk=intent["id"]).transitions.exclude(transition__in=AUDIT_EVENTS).count() == 2


@pytest.mark.django_db(transaction=True)
def test_in_process_or_redis_worker_processes_a_burst(alice, live_worker):
    client = client_for(alice)
    ids = []
    for i in range(6):
        data = jpeg_bytes((100 + i, 80))
        intent = create_intent(client, size=len(data)).json()
        assert put_bytes(intent["upload"]["url"], data).status_code == 202
        ids.append(intent["id"])
    assert [wait_for_status(i, timeout=60) for i in ids] == ["ready"] * 6
