"""A storm of 1,000 duplicate storage notifications for 10 objects: 10 flips, 10 derivative sets.

Notifications are at-least-once and may repeat with the same id (redelivery) or
with a new one (S3 can notify twice for one PUT; the local PUT and the client's
"complete" both report the same object). The inbox dedupes identical ones; the
lease makes any number of intake jobs for one row start exactly one attempt.
"""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.db import connection

from attachments.models import Attachment, Derivative, StorageEvent, TransitionLog
from attachments.services.audit import AUDIT_EVENTS
from attachments.storage import get_gateway
from attachments.uploads.services.uploads import object_arrived
from tests.support import client_for, create_intent, jpeg_bytes

from .support import assert_not_served, assert_ready_and_complete, assert_served_intact, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

OBJECTS = 10
EVENTS = 1000
THREADS = 4


@pytest.fixture
def worker():
    """A real Dramatiq worker on the configured broker, started when the test says so."""
    import dramatiq

    from ops.runtime import start_worker

    broker = dramatiq.get_broker()
    broker.flush_all()
    started = []
    yield lambda: started.append(start_worker(threads=4))
    for running in started:
        running.stop(timeout=10_000)
    broker.flush_all()
    connection.close()


@pytest.mark.parametrize("worker_during_storm", [False, True], ids=["storm-then-worker", "storm-with-worker"])
def test_a_thousand_duplicate_events_for_ten_objects(alice, bob, mallory, worker, worker_during_storm):
    import dramatiq

    if worker_during_storm:
        worker()
    client = client_for(alice)
    gateway = get_gateway()
    keys: dict[str, str] = {}
    for i in range(OBJECTS):
        data = jpeg_bytes((200 + i, 150))
        intent = create_intent(client, size=len(data)).json()
        key = Attachment.objects.get(pk=intent["id"]).storage_key
        gateway.write_chunks(key, [data])  # the bytes land in storage without our PUT (as with S3)
        keys[intent["id"]] = key
    ordered = list(keys.values())

    def event(i: int) -> dict:
        key = ordered[i % OBJECTS]
        # Half of each object's events repeat one notification id; the other half are each new.
        dedupe = f"sqs:{key}:etag-1" if (i // OBJECTS) % 2 == 0 else f"sqs:{key}:{i}"
        return {"key": key, "size": None, "source": "sqs", "dedupe_key": dedupe, "event_name": "ObjectCreated:Put"}

    outcomes: Counter[str] = Counter()
    errors: list[BaseException] = []
    lock = threading.Lock()

    def storm(part: int) -> None:
        try:
            for i in range(part, EVENTS, THREADS):
                outcome = object_arrived(**event(i)).outcome
                with lock:
                    outcomes[outcome] += 1
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=storm, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors
    assert sum(outcomes.values()) == EVENTS
    assert outcomes["duplicate"] == EVENTS // 2 - OBJECTS, outcomes  # identical ids: recorded once
    assert outcomes["unknown_key"] == 0
    assert StorageEvent.objects.count() == OBJECTS + EVENTS // 2
    if not worker_during_storm:
        # Every new notification id found its row pending: one intake job each, 510 for 10 files.
        assert outcomes["started"] == OBJECTS + EVENTS // 2, outcomes
        worker()

    ids = list(keys)
    wait_until(
        lambda: all(s == "ready" for s in Attachment.objects.filter(pk__in=ids).values_list("status", flat=True)),
        180,
        "every object to be ready",
    )
    broker = dramatiq.get_broker()
    for queue in ("intake", "scan", "derive"):
        broker.join(queue, timeout=120_000)  # every duplicate job has run, and changed nothing

    for attachment_id in ids:
        assert list(
            TransitionLog.objects.filter(attachment_id=attachment_id)
            .exclude(transition__in=AUDIT_EVENTS)
            .values_list("transition", flat=True)
        ) == ["start", "finish"]
        assert sorted(Derivative.objects.filter(attachment_id=attachment_id).values_list("kind", flat=True)) == [
            "sanitized",
            "thumbnail",
        ]
        assert_ready_and_complete(attachment_id)
        assert_served_intact(attachment_id, bob)
        assert_not_served(attachment_id, mallory)
    assert TransitionLog.objects.filter(transition="finish").count() == OBJECTS
    assert Derivative.objects.count() == 2 * OBJECTS
    stored = {info.key for info in gateway.list_prefix("")}
    expected = set(ordered) | set(Derivative.objects.values_list("storage_key", flat=True))
    assert stored == expected, stored ^ expected  # no stray or duplicate objects

    # Late duplicates of a ready file change nothing.
    late = object_arrived(key=ordered[0], size=None, source="sqs", dedupe_key="sqs:late", event_name="x")
    assert late.outcome == "ignored"
