"""A sweep batch's writes are per batch, not per row (issue #34).

Audit, quota usage, webhook events, their deliveries and the deliveries'
outbox jobs each cost the batch a fixed number of statements: a batch of six
rows costs what a batch of two costs.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from attachments.models import Attachment, Lifecycle, OutboxMessage, TransitionLog
from sweeper.reaping import reap_batch
from tests.sweeper.support import DAY, T0, CountingGateway, make_attachment

pytestmark = pytest.mark.django_db

LATER = T0 + 8 * DAY


@pytest.fixture
def endpoints(alice):
    """Two endpoints listening to everything: each reaped row makes an event with two deliveries."""
    from webhooks.models import WebhookEndpoint
    from webhooks.services.endpoints import forget

    made = [
        WebhookEndpoint.objects.create(
            tenant=alice.membership.tenant, url=f"https://hooks{i}.example.com/a", event_types=[]
        )
        for i in range(2)
    ]
    forget()
    yield made
    forget()


def _statements_for_a_batch(owner, rows: int) -> tuple[int, list[str]]:
    made = [make_attachment(owner, files=False) for _ in range(rows)]
    gateway = CountingGateway()
    with ThreadPoolExecutor(max_workers=2) as pool, CaptureQueriesContext(connection) as queries:
        result = reap_batch(now=LATER, after=None, size=100, gateway=gateway, pool=pool, workers=2)
    assert result.deleted == rows
    assert set(Attachment.objects.filter(pk__in=[a.pk for a in made]).values_list("lifecycle", flat=True)) == {
        Lifecycle.DELETED
    }
    return len(queries.captured_queries), [q["sql"] for q in queries.captured_queries]


def test_a_batch_costs_the_same_statements_for_two_rows_as_for_six(alice, endpoints):
    from webhooks.models import WebhookDelivery, WebhookEvent

    _statements_for_a_batch(alice, 1)  # the first batch also loads the endpoint list (a per-process cache)
    small, _ = _statements_for_a_batch(alice, 2)
    large, sql = _statements_for_a_batch(alice, 6)

    assert large == small, f"{large - small} more statements for 4 more rows:\n" + "\n".join(sql)
    # Every guarantee still holds, row by row: an audit entry, an event, a delivery per endpoint, its job.
    assert TransitionLog.objects.filter(transition="sweep_delete").count() == 9
    assert WebhookEvent.objects.filter(type="attachment.deleted").count() == 9
    assert WebhookDelivery.objects.count() == 18
    assert OutboxMessage.objects.filter(actor_name="webhook_deliver").count() == 18


def test_the_jobs_of_a_batch_are_marked_sent_in_one_statement(alice, endpoints, django_capture_on_commit_callbacks):
    """After the batch commits, its delivery jobs go to the broker and one UPDATE marks them all sent."""
    for _ in range(5):
        make_attachment(alice, files=False)
    with django_capture_on_commit_callbacks() as callbacks, ThreadPoolExecutor(max_workers=2) as pool:
        reap_batch(now=LATER, after=None, size=100, gateway=CountingGateway(), pool=pool, workers=2)
    assert OutboxMessage.objects.filter(actor_name="webhook_deliver", sent_at__isnull=True).count() == 10

    with CaptureQueriesContext(connection) as queries:
        for callback in callbacks:
            callback()

    writes = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("UPDATE")]
    assert len(writes) == 1 and "attachments_outboxmessage" in writes[0]
    assert OutboxMessage.objects.filter(actor_name="webhook_deliver", sent_at__isnull=True).count() == 0


def test_jobs_the_broker_refused_stay_in_the_outbox_counted_for_the_relay(
    alice, endpoints, monkeypatch, django_capture_on_commit_callbacks
):
    """A broker that is down when the batch commits: every job stays unsent, each attempt counted once."""
    import dramatiq

    for _ in range(3):
        make_attachment(alice, files=False)
    with django_capture_on_commit_callbacks() as callbacks, ThreadPoolExecutor(max_workers=2) as pool:
        reap_batch(now=LATER, after=None, size=100, gateway=CountingGateway(), pool=pool, workers=2)

    broker = dramatiq.get_broker()

    def broker_down(*args, **kwargs):
        raise ConnectionError("broker down")

    monkeypatch.setattr(broker.get_actor("webhook_deliver"), "send_with_options", broker_down)
    for callback in callbacks:
        callback()

    jobs = OutboxMessage.objects.filter(actor_name="webhook_deliver")
    assert jobs.count() == 6
    assert set(jobs.values_list("sent_at", "send_attempts")) == {(None, 1)}
