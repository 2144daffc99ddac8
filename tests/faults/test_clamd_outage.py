"""clamd stopped in the middle of a burst: files stay unreadable, then reach ready once it is back.

A private clamd (scripts/clamd.sh with its own directory and port) is the only
scanner the live worker uses, so stopping it touches nobody else's clamd.
Scanning fails closed: a scanner that does not answer is an infrastructure
error (retried with backoff, then failed + dead letter), never clean and never
a content decision.
"""

from __future__ import annotations

import pytest

from attachments.models import Attachment, DeadLetter
from attachments.services.moderation import attachment_requeue
from tests.support import client_for, jpeg_bytes, upload

from .support import assert_not_served, assert_ready_and_complete, assert_served_intact, wait_until

pytestmark = [pytest.mark.clamd, pytest.mark.redis, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SETTLED = ("ready", "failed", "rejected")


def _statuses(ids: list[str]) -> dict[str, str]:
    return dict(Attachment.objects.filter(pk__in=ids).values_list("pk", "status"))


def test_clamd_down_mid_burst_keeps_files_unreadable_until_it_is_back(
    alice, bob, mallory, private_clamd, live_worker, settings
):
    settings.CLAMD_SOCKET = private_clamd.socket
    settings.CLAMD_HOST = None
    client = client_for(alice)

    before = [upload(client, jpeg_bytes((320 + i, 240))) for i in range(6)]
    wait_until(lambda: "ready" in {str(s) for s in _statuses(before).values()}, 60, "a first file to be ready")
    private_clamd.stop()
    during = [upload(client, jpeg_bytes((480 + i, 360))) for i in range(6)]
    ids = before + during

    # Every file settles: scanned before the outage (ready), or out of attempts (failed).
    wait_until(lambda: all(s in SETTLED for s in _statuses(ids).values()), 90, "the burst to settle")
    rows = {str(r.pk): r for r in Attachment.objects.filter(pk__in=ids)}
    assert all(rows[i].status == "failed" for i in during), {i: rows[i].status for i in during}
    unscanned = [i for i in ids if rows[i].status != "ready"]
    for attachment_id in unscanned:
        row = rows[attachment_id]
        assert (row.status, row.reason_code) == ("failed", "infrastructure"), (row.status, row.reason_code)
        assert "clamd" in row.reason_message.lower() or "scan" in row.reason_message.lower(), row.reason_message
        assert DeadLetter.objects.filter(attachment=row, kind="processing", resolved_at__isnull=True).exists()
        assert not row.derivatives.exists()
        assert_not_served(attachment_id, bob, mallory)

    private_clamd.start()
    for attachment_id in unscanned:  # the human action on a dead letter
        attachment_requeue(attachment_id=attachment_id, actor="test:operator")
    wait_until(lambda: all(s == "ready" for s in _statuses(ids).values()), 90, "every file to be ready")
    for attachment_id in ids:
        assert_ready_and_complete(attachment_id)
        assert_served_intact(attachment_id, bob)
        assert_not_served(attachment_id, mallory)
    assert not DeadLetter.objects.filter(attachment_id__in=unscanned, resolved_at__isnull=True).exists()


def test_clamd_back_before_the_attempts_run_out_needs_no_human(alice, bob, private_clamd, live_worker, settings):
    settings.CLAMD_SOCKET = private_clamd.socket
    settings.CLAMD_HOST = None
    settings.AIRLOCK_MAX_ATTEMPTS = 50  # retries outlast the outage
    private_clamd.stop()
    ids = [upload(client_for(alice), jpeg_bytes((300 + i, 200))) for i in range(4)]
    wait_until(
        lambda: all(r >= 2 for r in Attachment.objects.filter(pk__in=ids).values_list("attempts", flat=True)),
        60,
        "every file to be retried",
    )
    assert set(_statuses(ids).values()) <= {"pending", "processing"}
    for attachment_id in ids:
        assert_not_served(attachment_id, bob)
    private_clamd.start()
    wait_until(lambda: all(s == "ready" for s in _statuses(ids).values()), 90, "every file to be ready")
    for attachment_id in ids:
        assert_ready_and_complete(attachment_id)
        assert_served_intact(attachment_id, bob)
