"""Retries (same webhook-id), timeouts, dead letters, disabling failing endpoints, replay, rotation."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.support import jpeg_bytes, run_pipeline, upload
from webhooks.models import DeliveryStatus, WebhookAttempt, WebhookDelivery, WebhookEndpoint

from .conftest import deliver_due, verified
from .receiver import Receiver

pytestmark = pytest.mark.django_db


def _answers(*statuses, delay: float = 0.0):
    """Answer each request with the next status; the last one repeats."""
    queue = list(statuses)

    def respond(request):
        status = queue.pop(0) if len(queue) > 1 else queue[0]
        return status, f"answer {status}".encode(), delay

    return respond


@pytest.fixture
def ready_file(alice, api):
    def make():
        attachment_id = upload(api(alice), jpeg_bytes())
        assert run_pipeline(attachment_id) == "ready"
        return attachment_id

    return make


def test_a_500_is_retried_with_the_same_webhook_id_and_body(make_endpoint, ready_file):
    receiver = Receiver(_answers(500, 503, 200)).start()
    try:
        endpoint = make_endpoint(receiver.url)
        ready_file()
        deliver_due()
        got = receiver.wait_for(lambda r: len(r) >= 3)
        assert len({r.webhook_id for r in got}) == 1
        assert len({r.body for r in got}) == 1
        payloads = [verified(r, endpoint.secret) for r in got]  # each attempt signed afresh
        assert payloads[0] == payloads[2]
        delivery = WebhookDelivery.objects.get()
        assert delivery.status == DeliveryStatus.DELIVERED and delivery.attempts == 3
        attempts = list(WebhookAttempt.objects.filter(delivery=delivery).order_by("started_at", "id"))
        assert [a.status_code for a in attempts] == [500, 503, 200] and [a.ok for a in attempts] == [False, False, True]
        assert attempts[0].response_snippet == "answer 500" and all(a.latency_ms is not None for a in attempts)
        endpoint.refresh_from_db()
        assert endpoint.failing_since is None and endpoint.consecutive_failures == 0
    finally:
        receiver.stop()


def test_a_timeout_is_a_failure_and_retried(make_endpoint, ready_file, settings):
    settings.AIRLOCK_WEBHOOK_DELIVERY = settings.AIRLOCK_WEBHOOK_DELIVERY.replace(timeout_seconds=0.3)
    slow = {"n": 0}

    def respond(request):
        slow["n"] += 1
        return 200, b"", 1.0 if slow["n"] == 1 else 0.0

    receiver = Receiver(respond).start()
    try:
        make_endpoint(receiver.url)
        ready_file()
        deliver_due()
        got = receiver.wait_for(lambda r: len(r) >= 2)
        assert got[0].webhook_id == got[1].webhook_id
        first, second = WebhookAttempt.objects.order_by("started_at", "id")
        assert first.error == "timeout" and first.status_code is None and not first.ok
        assert second.ok
    finally:
        receiver.stop()


def test_retries_stop_at_the_window_and_the_delivery_is_dead_lettered(make_endpoint, ready_file, settings):
    settings.AIRLOCK_WEBHOOK_DELIVERY = settings.AIRLOCK_WEBHOOK_DELIVERY.replace(retry_window_seconds=2.0)
    receiver = Receiver(_answers(500)).start()
    try:
        make_endpoint(receiver.url)
        ready_file()
        deliver_due()
        delivery = WebhookDelivery.objects.get()
        assert delivery.status == DeliveryStatus.DEAD and delivery.last_status_code == 500
        assert 3 <= delivery.attempts == len(receiver.received)
        # Backoff doubles (0.05 s, 0.1 s, then the 0.2 s cap here): later gaps are longer than the first.
        gaps = [b.at - a.at for a, b in zip(receiver.received, receiver.received[1:])]
        assert max(gaps[1:]) > gaps[0]
        # Nothing was tried after the window closed.
        assert receiver.received[-1].at - receiver.received[0].at < 2.0 + 1.0
    finally:
        receiver.stop()


def test_backoff_doubles_from_the_base_and_honours_retry_after(settings):
    from webhooks.services.delivery import backoff_seconds

    settings.AIRLOCK_WEBHOOK_DELIVERY = settings.AIRLOCK_WEBHOOK_DELIVERY.replace(
        retry_base_seconds=5, retry_max_seconds=3600
    )
    for attempts, expected in ((1, 5), (2, 10), (3, 20), (10, 2560), (20, 3600)):
        assert expected * 0.8 <= backoff_seconds(attempts) <= expected * 1.2
    assert backoff_seconds(1, retry_after=120) >= 120


def test_the_first_retry_waits_the_base_then_doubles(make_endpoint, ready_file, settings):
    from webhooks.services.delivery import delivery_attempt

    settings.AIRLOCK_WEBHOOK_DELIVERY = settings.AIRLOCK_WEBHOOK_DELIVERY.replace(
        retry_base_seconds=100, retry_max_seconds=3600
    )
    receiver = Receiver(_answers(500)).start()
    try:
        make_endpoint(receiver.url)
        ready_file()
        delivery = WebhookDelivery.objects.get()
        for attempts, expected in ((1, 100), (2, 200)):
            WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
            before = timezone.now()
            assert delivery_attempt(delivery.pk) == "retry"
            delivery.refresh_from_db()
            gap = (delivery.next_attempt_at - before).total_seconds()
            assert delivery.attempts == attempts and expected * 0.8 <= gap <= expected * 1.2 + 1, (attempts, gap)
    finally:
        receiver.stop()


@pytest.mark.parametrize("offset", [90, -30])
def test_retry_after_as_an_http_date_is_a_floor_too(offset):
    from email.utils import format_datetime

    from webhooks.client import _retry_after

    when = format_datetime(timezone.now() + timedelta(seconds=offset), usegmt=True)
    seconds = _retry_after(when)
    assert seconds is not None and (85 <= seconds <= 91 if offset > 0 else seconds == 0.0), seconds
    assert _retry_after("soon") is None and _retry_after("12") == 12.0


@pytest.mark.django_db(transaction=True)
def test_an_endpoint_deleted_while_another_process_still_lists_it_does_not_abort_the_change(make_endpoint, alice, api):
    """Endpoints are cached per process for a few seconds: a change reported meanwhile must still commit."""
    from webhooks.services import endpoints

    kept = make_endpoint("http://127.0.0.1:9/kept")
    gone = make_endpoint("http://127.0.0.1:9/gone")
    attachment_id = upload(api(alice), jpeg_bytes())
    assert {e.pk for e in endpoints.listening()} == {kept.pk, gone.pk}
    stale = endpoints._cache
    gone.delete()  # in the admin; this process forgets its cache, another one still holds it
    endpoints._cache = stale
    assert run_pipeline(attachment_id) == "ready"
    assert set(WebhookDelivery.objects.values_list("endpoint_id", flat=True)) == {kept.pk}


def test_410_gone_disables_the_endpoint(make_endpoint, ready_file):
    receiver = Receiver(_answers(410)).start()
    try:
        endpoint = make_endpoint(receiver.url)
        ready_file()
        deliver_due()
        endpoint.refresh_from_db()
        assert not endpoint.enabled and "410" in endpoint.disabled_reason
        assert WebhookDelivery.objects.get().status == DeliveryStatus.DEAD
        ready_file()  # a disabled endpoint is owed nothing new
        assert WebhookDelivery.objects.count() == 1
    finally:
        receiver.stop()


def test_an_endpoint_failing_for_long_is_disabled_and_its_backlog_dead_lettered(make_endpoint, ready_file, settings):
    from webhooks.services.delivery import delivery_attempt

    receiver = Receiver(_answers(500)).start()
    try:
        endpoint = make_endpoint(receiver.url)
        ready_file()
        ready_file()
        first, second = WebhookDelivery.objects.order_by("pk")
        # Failing since well past AIRLOCK_WEBHOOK_DISABLE_AFTER_SECONDS, with many failures in a row.
        WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
            failing_since=timezone.now() - timedelta(days=4), consecutive_failures=20
        )
        assert delivery_attempt(first.pk) == "retry"
        endpoint.refresh_from_db()
        assert not endpoint.enabled and endpoint.disabled_reason.startswith("failing since")
        second.refresh_from_db()
        assert second.status == DeliveryStatus.DEAD and "endpoint disabled" in second.last_error
    finally:
        receiver.stop()


def test_a_lone_failure_does_not_disable(make_endpoint, ready_file):
    from webhooks.services.delivery import delivery_attempt

    receiver = Receiver(_answers(500, 200)).start()
    try:
        endpoint = make_endpoint(receiver.url)
        ready_file()
        WebhookEndpoint.objects.filter(pk=endpoint.pk).update(failing_since=timezone.now() - timedelta(days=4))
        assert delivery_attempt(WebhookDelivery.objects.get().pk) == "retry"
        endpoint.refresh_from_db()
        assert endpoint.enabled and endpoint.consecutive_failures == 1
    finally:
        receiver.stop()


def test_replay_sends_a_dead_delivery_again_with_the_same_webhook_id(make_endpoint, ready_file, settings):
    from webhooks.services.delivery import delivery_replay

    settings.AIRLOCK_WEBHOOK_DELIVERY = settings.AIRLOCK_WEBHOOK_DELIVERY.replace(retry_window_seconds=0.1)
    receiver = Receiver(_answers(500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 200)).start()
    try:
        make_endpoint(receiver.url)
        ready_file()
        deliver_due()
        delivery = WebhookDelivery.objects.get()
        assert delivery.status == DeliveryStatus.DEAD
        receiver.respond = _answers(200)
        settings.AIRLOCK_WEBHOOK_DELIVERY = settings.AIRLOCK_WEBHOOK_DELIVERY.replace(retry_window_seconds=60)
        assert delivery_replay(delivery_ids=[delivery.pk]) == (1, 0)
        deliver_due()
        delivery.refresh_from_db()
        assert delivery.status == DeliveryStatus.DELIVERED
        assert len({r.webhook_id for r in receiver.received}) == 1 and receiver.received[-1].headers
    finally:
        receiver.stop()


def test_a_redirect_is_not_followed(make_endpoint, ready_file, settings):
    settings.AIRLOCK_WEBHOOK_DELIVERY = settings.AIRLOCK_WEBHOOK_DELIVERY.replace(retry_window_seconds=0.2)
    receiver = Receiver(_answers(302)).start()
    try:
        make_endpoint(receiver.url)
        ready_file()
        deliver_due()
        assert {r.path for r in receiver.received} == {"/hooks"}  # never /redirected
        delivery = WebhookDelivery.objects.get()
        assert delivery.status == DeliveryStatus.DEAD and delivery.last_status_code == 302
    finally:
        receiver.stop()


def test_secret_rotation_signs_with_both_until_the_overlap_ends(make_endpoint, ready_file, receiver, settings):
    from standardwebhooks import Webhook, WebhookVerificationError

    from webhooks.services.endpoints import endpoint_rotate_secret

    endpoint = make_endpoint(receiver.url)
    old = endpoint.secret
    endpoint = endpoint_rotate_secret(endpoint_id=endpoint.pk)
    new = endpoint.secret
    assert new != old and endpoint.previous_secret == old
    ready_file()
    deliver_due()
    [during] = receiver.wait_for(lambda r: len(r) >= 1)
    assert len(during.headers["webhook-signature"].split(" ")) == 2
    assert verified(during, old) == verified(during, new)  # a receiver on either secret accepts it
    # Once the overlap is over, only the new secret signs.
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(previous_secret_expires_at=timezone.now())
    ready_file()
    deliver_due()
    after = receiver.wait_for(lambda r: len(r) >= 2)[1]
    assert len(after.headers["webhook-signature"].split(" ")) == 1
    verified(after, new)
    with pytest.raises(WebhookVerificationError):
        Webhook(old).verify(after.body, after.headers)


def test_the_global_endpoint_rotates_with_two_secrets_in_settings(ready_file, receiver, settings):
    from webhooks import signing

    old, new = signing.new_secret(), signing.new_secret()
    settings.AIRLOCK_WEBHOOK_URL, settings.AIRLOCK_WEBHOOK_SECRET = receiver.url, [new, old]
    ready_file()
    deliver_due()
    [got] = receiver.wait_for(lambda r: len(r) >= 1)
    assert verified(got, old) == verified(got, new)


def test_the_tick_redrives_a_delivery_whose_message_was_lost(make_endpoint, ready_file, receiver, settings):
    from webhooks.services.delivery import delivery_attempt
    from webhooks.services.tick import redrive

    settings.AIRLOCK_WEBHOOK_DELIVERY = settings.AIRLOCK_WEBHOOK_DELIVERY.replace(redrive_seconds=60)
    make_endpoint(receiver.url)
    ready_file()
    delivery = WebhookDelivery.objects.get()
    # A worker claimed it and died mid-request: its lease is still running.
    WebhookDelivery.objects.filter(pk=delivery.pk).update(lease_until=timezone.now() + timedelta(seconds=30))
    assert delivery_attempt(delivery.pk) is None  # held: a duplicate message does nothing
    later = timezone.now() + timedelta(seconds=120)  # the lease expired, the message never came
    assert redrive(now=timezone.now()) == 0
    from attachments.models import OutboxMessage

    sent_before = OutboxMessage.objects.filter(actor_name="webhook_deliver").count()
    assert redrive(now=later) == 1
    assert OutboxMessage.objects.filter(actor_name="webhook_deliver").count() == sent_before + 1
    assert redrive(now=later) == 0  # just re-driven: not again until the grace passes
    WebhookDelivery.objects.filter(pk=delivery.pk).update(lease_until=None)
    assert delivery_attempt(delivery.pk) == "delivered"
    assert len(receiver.received) == 1


def test_history_is_purged_after_its_window_but_not_what_is_owed(make_endpoint, ready_file, receiver, settings):
    from sweeper.control import sweeper_control_set
    from sweeper.sweep import sweep_expired
    from webhooks.models import WebhookEvent

    settings.AIRLOCK_SWEEPER_KILLSWITCH = settings.AIRLOCK_SWEEPER_DRY_RUN = None
    make_endpoint(receiver.url)
    ready_file()
    ready_file()
    delivered, owed = WebhookDelivery.objects.order_by("pk")
    from webhooks.services.delivery import delivery_attempt

    assert delivery_attempt(delivered.pk) == "delivered"
    later = timezone.now() + timedelta(days=settings.AIRLOCK_RETENTION_DAYS.webhooks + 1)
    # The sweeper's brakes hold it: a dry run counts, the killswitch stops it.
    assert sweep_expired(now=later, dry_run=True).purged["webhook_events"] == 1
    sweeper_control_set(killswitch=True, actor="test")
    assert sweep_expired(now=later).purged == {}
    assert WebhookEvent.objects.count() == 2
    sweeper_control_set(killswitch=False, actor="test")

    assert sweep_expired(now=later).purged["webhook_events"] == 1
    left = set(WebhookEvent.objects.values_list("pk", flat=True))  # (and the sweep's own deletion events)
    assert owed.event_id in left and delivered.event_id not in left
    assert not WebhookAttempt.objects.exists()


def test_the_first_tick_of_a_process_with_an_in_process_broker_resends_at_once(
    make_endpoint, ready_file, receiver, settings, monkeypatch
):
    """Embedded `serve` restarted: the old process's in-memory messages are gone; no 60 s wait."""
    from attachments.models import OutboxMessage
    from webhooks.services import tick

    settings.AIRLOCK_WEBHOOK_DELIVERY = settings.AIRLOCK_WEBHOOK_DELIVERY.replace(redrive_seconds=60)
    make_endpoint(receiver.url)
    ready_file()
    jobs = OutboxMessage.objects.filter(actor_name="webhook_deliver")
    before = jobs.count()
    monkeypatch.setattr(tick, "_ticked", False)
    monkeypatch.setattr(tick, "_broker_is_in_process", lambda: True)
    tick.run_tick()
    assert jobs.count() == before + 1  # re-sent although it was enqueued just now
    tick.run_tick()
    assert jobs.count() == before + 1  # later ticks wait for the grace again
    monkeypatch.setattr(tick, "_ticked", False)
    monkeypatch.setattr(tick, "_broker_is_in_process", lambda: False)
    tick.run_tick()  # a shared broker (Redis) still holds the message: nothing to resend
    assert jobs.count() == before + 1
