"""Every database connection of the workers terminated (pg_terminate_backend) again and again: no lease waited.

A live worker (4 threads, Redis, PostgreSQL) processes a burst while this test
terminates every other backend of the test database five times, 0.4 s apart: a
database restart as a worker sees it. Each job that hits the disconnect runs
again in its worker (processing/outages.py), so every file is ready within a
minute, no attempt is spent, nothing is served before `ready`, and another
tenant's upload in the middle of it is accepted.
"""

from __future__ import annotations

import time

import pytest
from django.db import OperationalError, connection

from attachments.models import Attachment
from tests.support import client_for, jpeg_bytes, upload

from .support import assert_ready_and_complete, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

FILES = 12


def _terminate_other_backends() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return int(cursor.fetchone()[0])


def _as_a_client_would(call, *args):
    """The test client raises the disconnect a real server answers with 503 + Retry-After: try again, as clients do."""
    deadline = time.monotonic() + 20
    while True:
        try:
            return call(*args)
        except OperationalError:
            if time.monotonic() > deadline:
                raise
            connection.close()
            time.sleep(0.5)


def _not_served(attachment_id: str, user) -> None:
    """404 and no bytes, as support.assert_not_served; a 503 + Retry-After (the database still coming
    back: its connections' pool timed out) serves nothing either, and a client asks again."""
    deadline = time.monotonic() + 20
    for suffix in ("/download", "/thumbnail"):
        while True:
            response = client_for(user).get(f"/api/v1/attachments/{attachment_id}{suffix}")
            assert not getattr(response, "streaming", False), (suffix, response.status_code)
            if response.status_code != 503 or time.monotonic() > deadline:
                break
            assert response.has_header("Retry-After")
            connection.close()
            time.sleep(0.5)
        assert response.status_code == 404, (user.username, suffix, response.status_code)


def _statuses(ids: list[str]) -> dict[str, str]:
    return {str(pk): status for pk, status in Attachment.objects.filter(pk__in=ids).values_list("pk", "status")}


def test_connections_terminated_mid_burst_cost_no_attempt_and_no_lease(alice, bob, mallory, live_worker):
    client = client_for(alice)
    ids = [upload(client, jpeg_bytes((640 + i, 480))) for i in range(FILES)]
    terminated = 0
    for _ in range(5):
        terminated += _terminate_other_backends()
        statuses = _as_a_client_would(_statuses, ids)
        for attachment_id in ids:
            if statuses[attachment_id] != "ready":
                _as_a_client_would(_not_served, attachment_id, mallory)
        time.sleep(0.4)
    # Another tenant, right after: accepted (once the database answers again).
    ids.append(_as_a_client_would(lambda: upload(client_for(mallory), jpeg_bytes((200, 150)))))
    ended = time.monotonic()
    assert terminated > 0, "no worker connection was there to terminate"
    wait_until(lambda: set(_statuses(ids).values()) == {"ready"}, 60, "every file to be ready")
    print(f"{terminated} backends terminated; all ready {time.monotonic() - ended:.1f}s after the last")
    rows = Attachment.objects.filter(pk__in=ids)
    assert {row.attempts for row in rows} == {0}, "a disconnect spent an attempt"
    for attachment_id in ids:
        assert_ready_and_complete(attachment_id)
