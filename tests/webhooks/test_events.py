"""Every event type reaches a loopback receiver, signed (verified with `standardwebhooks`), with the resource.

Deliveries run inline here (as the actor runs them); tests/webhooks/test_live.py
runs them through a real worker on the configured broker.
"""

from __future__ import annotations

import time
from datetime import timedelta
from urllib.parse import urlsplit

import pytest
from django.utils import timezone

from attachments import signing
from tests.support import EICAR, jpeg_bytes, run_pipeline, upload
from tests.support.fake_clamd import erroring_clamd
from webhooks.models import WebhookDelivery, WebhookEvent

from .conftest import deliver_due, verified

pytestmark = pytest.mark.django_db


@pytest.fixture
def hooked(receiver, make_endpoint):
    return make_endpoint(receiver.url)


def _payloads(receiver, endpoint, n: int = 1) -> list[dict]:
    deliver_due()
    got = receiver.wait_for(lambda r: len(r) >= n, timeout=10)
    assert len(got) == n, [r.body for r in got]
    return [verified(r, endpoint.secret) for r in got]


def _resource(api, user, attachment_id) -> dict:
    response = api(user).get(f"/api/v1/attachments/{attachment_id}")
    assert response.status_code == 200
    return response.json()


def test_ready_carries_the_resource_exactly_as_get_renders_it(alice, api, hooked, receiver, monkeypatch):
    minted_at = time.time()
    monkeypatch.setattr(signing, "_now", lambda: minted_at)  # the signed links' expiry step, for both renders
    attachment_id = upload(api(alice), jpeg_bytes())
    assert run_pipeline(attachment_id) == "ready"
    [payload] = _payloads(receiver, hooked)
    assert payload["type"] == "attachment.ready"
    assert payload["data"] == _resource(api, alice, attachment_id)
    assert payload["data"]["available"] is True
    download = payload["data"]["links"]["download"]
    assert download.split("?")[0].endswith(f"/api/v1/attachments/{attachment_id}/download")
    assert set(payload) == {"type", "timestamp", "data"} and payload["timestamp"].endswith("Z")
    event = WebhookEvent.objects.get()
    assert receiver.received[0].webhook_id == event.id and event.id.startswith("msg_") and "." not in event.id


def test_rejected(alice, api, hooked, receiver):
    attachment_id = upload(api(alice), EICAR)
    assert run_pipeline(attachment_id) == "rejected"
    [payload] = _payloads(receiver, hooked)
    assert payload["type"] == "attachment.rejected"
    assert payload["data"] == _resource(api, alice, attachment_id)
    assert payload["data"]["reason"]["code"] in ("malware", "type_not_allowed")
    assert payload["data"]["available"] is False


def test_failed(alice, api, hooked, receiver, settings):
    attachment_id = upload(api(alice), jpeg_bytes())
    settings.AIRLOCK_RETRIES = settings.AIRLOCK_RETRIES.replace(max_attempts=1)
    with erroring_clamd(settings):  # up, yet failing every scan: attempts run out
        assert run_pipeline(attachment_id) == "failed"
    [payload] = _payloads(receiver, hooked)
    assert payload["type"] == "attachment.failed"
    assert payload["data"]["reason"]["code"] == "infrastructure"
    assert payload["data"] == _resource(api, alice, attachment_id)


def test_committed(alice, api, hooked, receiver):
    attachment_id = upload(api(alice), jpeg_bytes())
    assert run_pipeline(attachment_id) == "ready"
    response = api(alice).post(
        "/api/v1/attachments/commit", {"ids": [attachment_id], "ref": "listing:42"}, format="json"
    )
    assert response.status_code == 200
    ready, committed = _payloads(receiver, hooked, n=2)
    assert (ready["type"], committed["type"]) == ("attachment.ready", "attachment.committed")
    assert committed["data"] == _resource(api, alice, attachment_id)
    assert committed["data"]["committed"] is True and committed["data"]["ref"] == "listing:42"
    assert committed["data"]["available"] is True


def test_deleted_when_swept_after_expiry(alice, api, hooked, receiver):
    from sweeper.sweep import sweep_expired

    attachment_id = upload(api(alice), jpeg_bytes())
    report = sweep_expired(now=timezone.now() + timedelta(days=30))
    assert report.deleted == 1
    [payload] = _payloads(receiver, hooked)
    assert payload["type"] == "attachment.deleted"
    assert payload["data"]["id"] == attachment_id and "download" not in payload["data"]["links"]
    assert api(alice).get(f"/api/v1/attachments/{attachment_id}").status_code == 404


def test_deleted_when_discarded_and_reaped(alice, api, hooked, receiver):
    from sweeper.sweep import sweep_expired

    attachment_id = upload(api(alice), jpeg_bytes())
    assert api(alice).post(f"/api/v1/attachments/{attachment_id}/discard").status_code == 204
    assert not WebhookEvent.objects.exists()  # discarding is not deleting: the sweep is
    sweep_expired(now=timezone.now() + timedelta(minutes=1))
    [payload] = _payloads(receiver, hooked)
    assert payload["type"] == "attachment.deleted" and payload["data"]["id"] == attachment_id


def test_deleted_when_the_owner_is_erased(alice, api, hooked, receiver):
    from attachments.retention.services.erasure import erasure_scope_user
    from sweeper.erasure import erase

    attachment_id = upload(api(alice), jpeg_bytes())
    assert run_pipeline(attachment_id) == "ready"
    assert (
        api(alice)
        .post("/api/v1/attachments/commit", {"ids": [attachment_id], "ref": "ad:1"}, format="json")
        .status_code
        == 200
    )
    erase(erasure_scope_user("alice"), actor="command:erase_user:test")
    ready, committed, deleted = _payloads(receiver, hooked, n=3)
    assert deleted["type"] == "attachment.deleted" and deleted["data"]["id"] == attachment_id
    assert deleted["data"]["lifecycle"] == "deleted" and "download" not in deleted["data"]["links"]
    # Still `ready` by status: `available` is what says it can no longer be used.
    assert (deleted["data"]["status"], deleted["data"]["available"]) == ("ready", False)
    assert (ready["data"]["available"], committed["data"]["available"]) == (True, True)


def test_deleted_when_taken_down(alice, api, hooked, receiver):
    from attachments.services.moderation import attachment_take_down

    attachment_id = upload(api(alice), jpeg_bytes())
    assert run_pipeline(attachment_id) == "ready"
    attachment_take_down(attachment_id=attachment_id, actor="staff:mod", note="abuse report")
    ready, deleted = _payloads(receiver, hooked, n=2)
    assert deleted["type"] == "attachment.deleted"
    assert deleted["data"]["status"] == "rejected" and deleted["data"]["reason"]["code"] == "moderator"
    assert deleted["data"]["available"] is False
    assert deleted["data"] == _resource(api, alice, attachment_id)


def test_nothing_is_recorded_when_nobody_listens(alice, api):
    attachment_id = upload(api(alice), jpeg_bytes())
    assert run_pipeline(attachment_id) == "ready"
    assert not WebhookEvent.objects.exists() and not WebhookDelivery.objects.exists()


def test_a_tenant_endpoint_hears_only_its_tenant_and_its_event_types(alice, mallory, api, receiver, make_endpoint):
    from .receiver import Receiver

    acme = make_endpoint(receiver.url, tenant="acme", event_types=["attachment.committed"])
    other = Receiver().start()
    try:
        evil = make_endpoint(other.url, tenant="evil")
        mine = upload(api(alice), jpeg_bytes())
        theirs = upload(api(mallory), jpeg_bytes())
        assert run_pipeline(mine) == run_pipeline(theirs) == "ready"
        for user, attachment_id in ((alice, mine), (mallory, theirs)):
            api(user).post("/api/v1/attachments/commit", {"ids": [attachment_id], "ref": "r:1"}, format="json")
        deliver_due()
        [acme_payload] = [verified(r, acme.secret) for r in receiver.wait_for(lambda r: len(r) >= 1)]
        assert (acme_payload["type"], acme_payload["data"]["id"]) == ("attachment.committed", mine)
        evil_payloads = [verified(r, evil.secret) for r in other.wait_for(lambda r: len(r) >= 2)]
        assert [(p["type"], p["data"]["id"]) for p in evil_payloads] == [
            ("attachment.ready", theirs),
            ("attachment.committed", theirs),
        ]
        assert len(receiver.received) == 1
    finally:
        other.stop()


def test_the_global_endpoint_hears_every_tenant(alice, mallory, api, receiver, settings):
    from webhooks import signing

    secret = signing.new_secret()
    settings.AIRLOCK_WEBHOOK_URL, settings.AIRLOCK_WEBHOOK_SECRET = receiver.url, [secret]
    ids = {upload(api(alice), jpeg_bytes()), upload(api(mallory), jpeg_bytes())}
    for attachment_id in ids:
        assert run_pipeline(attachment_id) == "ready"
    deliver_due()
    payloads = [verified(r, secret) for r in receiver.wait_for(lambda r: len(r) >= 2)]
    assert {p["data"]["id"] for p in payloads} == ids
    assert {p["type"] for p in payloads} == {"attachment.ready"}


def test_an_event_rolls_back_with_its_change(alice, api, hooked):
    from django.db import transaction

    from attachments.services.moderation import attachment_take_down

    attachment_id = upload(api(alice), jpeg_bytes())
    with pytest.raises(RuntimeError), transaction.atomic():
        attachment_take_down(attachment_id=attachment_id, actor="staff:mod", note="x")
        assert WebhookEvent.objects.count() == 1
        raise RuntimeError("the change fails after the event was written")
    assert not WebhookEvent.objects.exists() and not WebhookDelivery.objects.exists()


def test_deleted_when_released_and_swept_after_the_grace(alice, api, hooked, receiver, settings):
    from sweeper.sweep import sweep_expired

    attachment_id = upload(api(alice), jpeg_bytes())
    assert run_pipeline(attachment_id) == "ready"
    assert (
        api(alice)
        .post("/api/v1/attachments/commit", {"ids": [attachment_id], "ref": "ad:42"}, format="json")
        .status_code
        == 200
    )
    assert api(alice).post("/api/v1/attachments/release", {"ref": "ad:42"}, format="json").status_code == 200
    assert sweep_expired(now=timezone.now() + timedelta(minutes=1)).deleted == 0  # within the grace
    assert WebhookEvent.objects.filter(type="attachment.deleted").count() == 0

    grace = timedelta(seconds=settings.AIRLOCK_LIFECYCLE_SECONDS.release_grace)
    assert sweep_expired(now=timezone.now() + grace + timedelta(minutes=1)).deleted == 1

    ready, committed, deleted = _payloads(receiver, hooked, n=3)
    assert (ready["type"], committed["type"], deleted["type"]) == (
        "attachment.ready",
        "attachment.committed",
        "attachment.deleted",
    )
    assert deleted["data"]["id"] == attachment_id and deleted["data"]["lifecycle"] == "deleted"
    assert deleted["data"]["ref"] == "ad:42" and "download" not in deleted["data"]["links"]
    assert deleted["data"]["available"] is False


def test_ready_video_carries_the_probe_facts_and_the_poster(alice, api, hooked, receiver):
    from tests.corpus import corpus_dir

    name = "video_rotated.mov"
    data = (corpus_dir() / "generated" / name).read_bytes()
    attachment_id = upload(api(alice), data, profile="media", filename=name, content_type="video/quicktime")
    assert run_pipeline(attachment_id) == "ready"
    [payload] = _payloads(receiver, hooked)
    assert payload["type"] == "attachment.ready"
    meta = payload["data"]["metadata"]
    assert {
        k: meta[k]
        for k in (
            "container",
            "width",
            "height",
            "rotation",
            "video_codec",
            "frame_rate",
            "audio_codec",
            "audio_channels",
            "audio_sample_rate",
            "stream_count",
        )
    } == {
        "container": "mov",
        "width": 48,
        "height": 64,
        "rotation": 90,
        "video_codec": "h264",
        "frame_rate": 10.0,
        "audio_codec": None,
        "audio_channels": None,
        "audio_sample_rate": None,
        "stream_count": 1,
    }
    assert 1.9 <= meta["duration_seconds"] <= 2.1 and meta["bit_rate"] > 0
    assert payload["data"]["derivatives"]["poster"] == {"width": 48, "height": 64}
    assert urlsplit(payload["data"]["links"]["poster"]).path.endswith(f"/api/v1/attachments/{attachment_id}/poster")
    assert payload["data"] == _resource(api, alice, attachment_id)


def test_ready_audio_carries_the_probe_facts(alice, api, hooked, receiver):
    from tests.corpus import corpus_dir

    data = (corpus_dir() / "generated" / "audio_opus.ogg").read_bytes()
    attachment_id = upload(api(alice), data, profile="media", filename="memo.ogg", content_type="audio/ogg")
    assert run_pipeline(attachment_id) == "ready"
    [payload] = _payloads(receiver, hooked)
    meta = payload["data"]["metadata"]
    assert (meta["container"], meta["audio_codec"], meta["audio_channels"], meta["stream_count"]) == (
        "ogg",
        "opus",
        2,
        1,
    )
    assert meta["video_codec"] is None and meta["width"] is None and 1.9 <= meta["duration_seconds"] <= 2.1
    assert "poster" not in payload["data"]["derivatives"] and "poster" not in payload["data"]["links"]
