"""clamd stopped in the middle of a burst for longer than the retry budget: files wait, then reach ready by themselves.

A private clamd (its own directory and socket) is the only scanner the live
worker uses, so stopping it touches nobody else's clamd. Scanning fails closed:
while the scanner does not answer, nothing is served before `ready`; the files
wait for it without spending attempts (a down dependency is not a verdict),
and every one is ready within a minute of its return, with no operator.
"""

from __future__ import annotations

import time

import pytest

from attachments.models import Attachment, DeadLetter
from attachments.services import backlog
from tests.support import client_for, jpeg_bytes, upload

from .support import assert_not_served, assert_ready_and_complete, assert_served_intact, wait_until

pytestmark = [pytest.mark.clamd, pytest.mark.redis, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# Longer than the whole retry budget of the test settings (five attempts, backoff from 0.05 s) many times over.
OUTAGE_SECONDS = 12
RECOVERY_SECONDS = 60
# Longer than the backlog limit the next test sets, many times over, and than a dependency wait.
BACKLOG_OUTAGE_SECONDS = 24


def _statuses(ids: list[str]) -> dict[str, str]:
    return {str(pk): status for pk, status in Attachment.objects.filter(pk__in=ids).values_list("pk", "status")}


def test_clamd_down_longer_than_the_retry_budget_heals_by_itself(
    alice, bob, mallory, private_clamd, live_worker, settings
):
    settings.CLAMD_SOCKET = private_clamd.socket
    settings.CLAMD_HOST = None
    client = client_for(alice)

    before = [upload(client, jpeg_bytes((320 + i, 240))) for i in range(4)]
    wait_until(lambda: "ready" in _statuses(before).values(), 60, "a first file to be ready")
    private_clamd.stop()
    down_at = time.monotonic()
    during = [upload(client, jpeg_bytes((480 + i, 360))) for i in range(6)]
    other_tenant = upload(client_for(mallory), jpeg_bytes((200, 150)))  # upload() asserts it was accepted
    ids = [*before, *during, other_tenant]

    while time.monotonic() - down_at < OUTAGE_SECONDS:
        statuses = _statuses(ids)
        assert not {s for s in statuses.values()} & {"failed", "rejected"}, statuses
        for attachment_id in during:
            if statuses[attachment_id] != "ready":
                assert_not_served(attachment_id, bob, mallory)
        time.sleep(1)
    rows = Attachment.objects.filter(pk__in=during)
    assert {row.status for row in rows} <= {"pending", "processing"}, "scanned while the only scanner was down"
    assert {row.attempts for row in rows} == {0}, "a down scanner spent attempts"

    private_clamd.start()
    back_at = time.monotonic()
    wait_until(lambda: set(_statuses(ids).values()) == {"ready"}, RECOVERY_SECONDS, "every file to be ready")
    print(f"recovered {time.monotonic() - back_at:.1f}s after clamd came back")
    assert not DeadLetter.objects.filter(attachment_id__in=ids).exists()
    for attachment_id in ids:
        assert_ready_and_complete(attachment_id)
    for attachment_id in during:
        assert_served_intact(attachment_id, bob)


def test_files_waiting_out_a_clamd_outage_do_not_pause_their_tenants_uploads(
    alice, bob, mallory, private_clamd, live_worker, settings
):
    """A scanner outage longer than the backlog limit, many files of one tenant waiting: its uploads go on."""
    settings.CLAMD_SOCKET = private_clamd.socket
    settings.CLAMD_HOST = None
    settings.AIRLOCK_MAX_BACKLOG_SECONDS = 4
    backlog.forget()
    client = client_for(alice)

    private_clamd.stop()
    down_at = time.monotonic()
    waiting = [upload(client, jpeg_bytes((400 + i, 300))) for i in range(backlog.QUEUE_DEPTH * 2)]
    accepted = 0
    while time.monotonic() - down_at < BACKLOG_OUTAGE_SECONDS:
        time.sleep(2)
        statuses = _statuses(waiting)
        assert set(statuses.values()) <= {"pending", "processing"}, statuses
        for attachment_id in waiting[:3]:
            assert_not_served(attachment_id, bob, mallory)
        if time.monotonic() - down_at > 2 * settings.AIRLOCK_MAX_BACKLOG_SECONDS:
            # Waiting files older than the limit, more than QUEUE_DEPTH of them: not a backlog, the scanner's outage.
            waiting.append(upload(client, jpeg_bytes((500 + accepted, 300))))  # asserts 201 and 202
            accepted += 1
    assert accepted >= 3
    assert Attachment.objects.filter(pk__in=waiting, dependency_wait_at__isnull=False).count() >= backlog.QUEUE_DEPTH

    private_clamd.start()
    back_at = time.monotonic()
    wait_until(lambda: set(_statuses(waiting).values()) == {"ready"}, RECOVERY_SECONDS, "every file to be ready")
    print(f"recovered {time.monotonic() - back_at:.1f}s after clamd came back")
    assert not DeadLetter.objects.filter(attachment_id__in=waiting).exists()
    for attachment_id in waiting:
        assert_ready_and_complete(attachment_id)
