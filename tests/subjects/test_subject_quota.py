"""The optional per-subject quota (AIRLOCK_SUBJECT_QUOTA_BYTES/FILES): each of a host's people has its own room."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from attachments.models import Attachment, SubjectUsage, Tenant
from attachments.services.quotas import counted_q, tenant_usage_recount
from tests.subjects.support import as_subject
from tests.support import create_intent, jpeg_bytes, put_bytes, run_pipeline

CLIENTS = 20
SIZE = 1000


def _refused(response, *, quota: str, subject: str, used: int, limit: int) -> None:
    assert response.status_code == 413, response.content
    error = response.json()["error"]
    assert error["code"] == "QUOTA_EXCEEDED"
    assert error["details"] == {
        "quota": quota,
        "subject": subject,
        "used": used,
        "limit": limit,
        "requested": 1 if quota == "files" else SIZE,
    }


def _counter(subject: str, tenant: str = "acme") -> tuple[int, int]:
    row = SubjectUsage.objects.get(tenant__slug=tenant, subject=subject)
    return row.bytes_used, row.files_used


def _recounted(subject: str, tenant: str = "acme") -> tuple[int, int]:
    rows = Attachment.objects.filter(counted_q(), tenant__slug=tenant, subject=subject)
    return sum(r.stored_size if r.stored_size is not None else r.declared_size for r in rows), rows.count()


@pytest.mark.django_db
def test_a_subject_at_its_file_quota_is_refused_and_another_subject_is_not(alice, settings):
    settings.AIRLOCK_SUBJECT_QUOTA = settings.AIRLOCK_SUBJECT_QUOTA.replace(files=2)
    ann, ben = as_subject(alice, "user-ann"), as_subject(alice, "user-ben")
    first = create_intent(ann, size=SIZE).json()["id"]
    assert create_intent(ann, size=SIZE).status_code == 201
    _refused(create_intent(ann, size=SIZE), quota="files", subject="user-ann", used=2, limit=2)
    assert create_intent(ben, size=SIZE).status_code == 201  # same token, another person
    assert create_intent(as_subject(alice, None), size=SIZE).status_code == 201  # the host as itself
    # A discarded file stops counting at once: Ann has room again.
    assert ann.post(f"/api/v1/attachments/{first}/discard").status_code == 204
    assert create_intent(ann, size=SIZE).status_code == 201
    assert _counter("user-ann") == _recounted("user-ann") == (2 * SIZE, 2)
    assert _counter("user-ben") == (SIZE, 1)


@pytest.mark.django_db
def test_the_byte_quota_counts_the_stored_size_once_known(alice, settings):
    data = jpeg_bytes((60, 60))
    settings.AIRLOCK_SUBJECT_QUOTA = settings.AIRLOCK_SUBJECT_QUOTA.replace(bytes=3 * SIZE)
    ann = as_subject(alice, "user-ann")
    intent = create_intent(ann, size=len(data)).json()
    assert put_bytes(intent["upload"]["url"], data).status_code == 202
    assert run_pipeline(intent["id"]) == "ready"
    assert _counter("user-ann") == _recounted("user-ann")
    used = _counter("user-ann")[0]
    room = 3 * SIZE - used
    assert create_intent(ann, size=room).status_code == 201
    response = create_intent(ann, size=SIZE)
    assert response.status_code == 413 and response.json()["error"]["details"]["subject"] == "user-ann"
    assert response.json()["error"]["details"]["used"] == 3 * SIZE


@pytest.mark.django_db
def test_a_rejected_file_and_an_erased_subject_free_their_room(alice, settings, samples):
    settings.AIRLOCK_SUBJECT_QUOTA = settings.AIRLOCK_SUBJECT_QUOTA.replace(files=5)
    ann = as_subject(alice, "user-ann")
    bad = create_intent(ann, size=len(samples.eicar)).json()
    assert put_bytes(bad["upload"]["url"], samples.eicar).status_code == 202
    run_pipeline(bad["id"])
    assert Attachment.objects.get(pk=bad["id"]).status in ("rejected", "failed")
    create_intent(ann, size=SIZE)
    assert _counter("user-ann") == _recounted("user-ann") == (SIZE, 1)
    assert ann.post("/api/v1/subjects/erase", {"subject": "user-ann"}, format="json").status_code == 200
    assert _counter("user-ann") == _recounted("user-ann") == (0, 0)


@pytest.mark.django_db
def test_without_a_subject_quota_no_subject_counter_is_kept(alice, settings):
    assert settings.AIRLOCK_SUBJECT_QUOTA.bytes is None and settings.AIRLOCK_SUBJECT_QUOTA.files is None
    ann = as_subject(alice, "user-ann")
    pk = create_intent(ann, size=SIZE).json()["id"]
    assert ann.post(f"/api/v1/attachments/{pk}/discard").status_code == 204
    assert not SubjectUsage.objects.exists()


@pytest.mark.django_db
def test_a_recount_drops_stale_subject_counters_and_they_are_rebuilt_from_the_rows(alice, settings):
    settings.AIRLOCK_SUBJECT_QUOTA = settings.AIRLOCK_SUBJECT_QUOTA.replace(files=3)
    ann = as_subject(alice, "user-ann")
    create_intent(ann, size=SIZE)
    # a period without: the counter is not moved
    settings.AIRLOCK_SUBJECT_QUOTA = settings.AIRLOCK_SUBJECT_QUOTA.replace(files=None)
    create_intent(ann, size=SIZE)
    assert _counter("user-ann") == (SIZE, 1)  # stale
    tenant_usage_recount(tenant_id=Tenant.objects.get(slug="acme").pk)
    assert not SubjectUsage.objects.exists()
    settings.AIRLOCK_SUBJECT_QUOTA = settings.AIRLOCK_SUBJECT_QUOTA.replace(files=3)
    assert create_intent(ann, size=SIZE).status_code == 201
    assert _counter("user-ann") == (3 * SIZE, 3)
    _refused(create_intent(ann, size=SIZE), quota="files", subject="user-ann", used=3, limit=3)


@pytest.mark.parametrize("quota", ["files", "bytes"])
def test_twenty_concurrent_intents_of_one_subject_race_for_its_last_room(transactional_db, make_user, settings, quota):
    """20 threads, one service token, one subject: exactly one takes the last room (PostgreSQL's row lock)."""
    host = make_user("host", tenant="race")
    limit, fill = (3, [SIZE, SIZE]) if quota == "files" else (10 * SIZE, [9 * SIZE])
    settings.AIRLOCK_SUBJECT_QUOTA = settings.AIRLOCK_SUBJECT_QUOTA.replace(**{quota: limit})
    for size in fill:
        assert create_intent(as_subject(host, "guest-1"), size=size).status_code == 201
    assert create_intent(as_subject(host, "guest-2"), size=SIZE).status_code == 201
    clients = [as_subject(host, "guest-1") for _ in range(CLIENTS)]
    barrier = threading.Barrier(CLIENTS)

    def send(i: int):
        barrier.wait(timeout=30)
        try:
            response = create_intent(clients[i], size=SIZE)
            return response.status_code, response.json()
        finally:
            connection.close()

    with ThreadPoolExecutor(CLIENTS) as pool:
        results = list(pool.map(send, range(CLIENTS)))

    assert sorted(status for status, _ in results) == [201] + [413] * (CLIENTS - 1)
    for status, body in results:
        if status == 413:
            details = body["error"]["details"]
            assert details["quota"] == quota and details["subject"] == "guest-1"
            assert details["used"] == limit and details["limit"] == limit
    expected = (sum(fill) + SIZE, len(fill) + 1)
    assert _counter("guest-1", "race") == _recounted("guest-1", "race") == expected
    assert _counter("guest-2", "race") == (SIZE, 1)


@pytest.mark.django_db
def test_with_a_subject_quota_an_intent_adds_one_conditional_update_in_its_transaction(alice, settings, monkeypatch):
    """Without a subject quota the intent is unchanged (tests/api/test_hot_paths.py pins it); with one,
    the subject's conditional UPDATE follows the tenant's inside the intent's transaction."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from attachments.services import backlog

    # The backlog age is read at most once a second per process: held for the test, as the hot-path pins do.
    monkeypatch.setattr(backlog, "_CACHE_SECONDS", 3600.0)
    backlog.forget()
    settings.AIRLOCK_SUBJECT_QUOTA = settings.AIRLOCK_SUBJECT_QUOTA.replace(files=10)
    ann = as_subject(alice, "user-ann")
    assert create_intent(ann, size=SIZE).status_code == 201  # the first builds the subject's counter
    with CaptureQueriesContext(connection) as ctx:
        assert create_intent(ann, size=SIZE).status_code == 201
    statements = [q["sql"].upper() for q in ctx.captured_queries if "SAVEPOINT" not in q["sql"].upper()]
    updates = [sql for sql in statements if sql.startswith("UPDATE")]
    assert [sql.split()[1] for sql in updates] == ['"ATTACHMENTS_TENANTUSAGE"', '"ATTACHMENTS_SUBJECTUSAGE"']
    assert not any(sql.startswith("WITH ROOM AS") for sql in statements)  # the transaction path
    assert sum(sql.startswith("INSERT") for sql in statements) == 2  # the row and its audit entry
    # Token+user+tenant, the pending-cap probe, the two UPDATEs and two INSERTs.
    assert len(statements) == 6, statements
