"""The two hottest endpoints stay cheap (few, fixed queries) and no shortcut changes an answer.

bench/api.py measures their throughput against bare one-query views; these
tests pin what made them cheap (query counts, no transaction around the
intent's single INSERT, the status read's narrow row from
`Attachment.objects.for_resource()`, the pending cap probed up to the
limit only, inside the intent's INSERT on PostgreSQL, through `Attachment.objects.outstanding_uploads()`)
so that a regression fails here rather than only in a noisy benchmark. The
shared-serializer fast path has its own tests (test_resource_fast_path.py).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from attachments.models import Attachment, Lifecycle, Status, TenantUsage
from attachments.services.ratelimits import pending_at_limit
from attachments.subjects import subject_of
from tests.support import create_intent, jpeg_bytes, run_pipeline, upload

pytestmark = pytest.mark.django_db


def _queries(call) -> list[str]:
    with CaptureQueriesContext(connection) as ctx:
        response = call()
        if getattr(response, "streaming", False):
            b"".join(response.streaming_content)
    assert response.status_code < 300, response.content
    return [q["sql"] for q in ctx.captured_queries]


# --- intents ---------------------------------------------------------------------


def test_intent_is_two_queries_whatever_the_backlog(alice, api, monkeypatch):
    from attachments.services import backlog

    # The pipeline-backlog age (load shedding) is read at most once a second per
    # process; pinned here so a slow run does not read it twice.
    monkeypatch.setattr(backlog, "_CACHE_SECONDS", 3600.0)
    backlog.forget()
    client = api(alice)
    first = _queries(lambda: create_intent(client))
    for _ in range(5):
        assert create_intent(client).status_code == 201
    later = _queries(lambda: create_intent(client))
    # Token+user+tenant, then the row with its room in the tenant's counter and the
    # subject's pending cap; the first also reads the backlog age.
    statements = [sql for sql in later if "SAVEPOINT" not in sql.upper()]
    assert "ORDER BY" in first[1].upper(), first
    if connection.vendor == "postgresql":
        # One statement takes the cap, the room and inserts (attachment_insert_reserving): no transaction.
        assert len(first) == 3 and len(later) == 2, later
        assert later[1].upper().startswith('WITH ROOM AS (UPDATE "ATTACHMENTS_TENANTUSAGE"'), later
        assert 'NOT EXISTS(SELECT 1 AS "A" FROM "ATTACHMENTS_ATTACHMENT"' in later[1].upper(), later  # the cap
        assert 'INSERT INTO "ATTACHMENTS_ATTACHMENT"' in later[1].upper(), later
        assert 'INSERT INTO "ATTACHMENTS_TRANSITIONLOG"' in later[1].upper(), later  # the intent's audit entry
    else:
        # The pending-cap probe, the conditional UPDATE of the counter, then the INSERT and
        # the intent's audit entry, committed together (a savepoint inside the test's transaction).
        assert len([sql for sql in first if "SAVEPOINT" not in sql.upper()]) == 6, first
        assert len(statements) == 5, later
        assert "LIMIT 1" in statements[1].upper(), statements
        assert 'INSERT INTO "ATTACHMENTS_TRANSITIONLOG"' in statements[4].upper(), statements
        assert statements[2].upper().startswith('UPDATE "ATTACHMENTS_TENANTUSAGE"'), statements
        assert len(later) - len(statements) == 2, later


def test_intent_without_room_inserts_nothing_and_names_the_quota(alice, api, settings):
    """The one-statement path refuses as the transaction path does: no row, no counter change."""
    client = api(alice)
    assert create_intent(client).status_code == 201
    used = TenantUsage.objects.get(tenant=alice.membership.tenant)
    settings.AIRLOCK_TENANT_QUOTA = settings.AIRLOCK_TENANT_QUOTA.replace(files=used.files_used)
    rows = Attachment.objects.count()
    response = create_intent(client)
    assert response.status_code == 413, response.content
    assert response.json()["error"]["code"] == "QUOTA_EXCEEDED"
    assert response.json()["error"]["details"]["limit"] == used.files_used
    assert Attachment.objects.count() == rows
    after = TenantUsage.objects.get(tenant=alice.membership.tenant)
    assert (after.files_used, after.bytes_used) == (used.files_used, used.bytes_used)
    settings.AIRLOCK_TENANT_QUOTA = settings.AIRLOCK_TENANT_QUOTA.replace(files=used.files_used + 1)
    assert create_intent(client).status_code == 201
    assert TenantUsage.objects.get(tenant=alice.membership.tenant).files_used == used.files_used + 1


@pytest.mark.parametrize(
    ("row", "counts"),
    [
        ({}, True),
        ({"uploaded_at": "now"}, False),  # the bytes arrived
        ({"status": Status.PROCESSING}, False),
        ({"lifecycle": Lifecycle.COMMITTED}, False),
        ({"lifecycle": Lifecycle.DISCARDED}, False),
        ({"expires_at": "past"}, False),  # expired, waiting for the sweeper
    ],
)
def test_pending_probe_counts_only_outstanding_intents(alice, bob, row, counts):
    now = timezone.now()
    tenant = alice.membership.tenant

    def make(owner, **fields):
        pk = fields.pop("pk")
        values = {
            "uploaded_at": None,
            "status": Status.PENDING,
            "lifecycle": Lifecycle.STAGED,
            "expires_at": now + timedelta(days=7),
            **fields,
        }
        if values["uploaded_at"] == "now":
            values["uploaded_at"] = now
        if values["expires_at"] == "past":
            values["expires_at"] = now - timedelta(seconds=1)
        Attachment.objects.create(
            tenant=tenant,
            owner=owner,
            subject=owner.get_username(),
            profile="image",
            filename="a.jpg",
            declared_size=1,
            declared_type="image/jpeg",
            storage_key=f"k/{owner.pk}/{pk}",
            created_at=now,
            **values,
        )

    def at_limit(user, limit: int) -> bool:
        return pending_at_limit(tenant_id=user.membership.tenant_id, subject=subject_of(user), now=now, limit=limit)

    make(alice, pk=1)  # one outstanding intent in every case
    make(alice, pk=2, **row)
    make(bob, pk=3)  # someone else's never counts
    with CaptureQueriesContext(connection) as ctx:
        assert at_limit(alice, 1)
    # One probe that stops at the limit-th row, never a COUNT over the whole backlog.
    [probe] = [q["sql"].upper() for q in ctx.captured_queries]
    assert "LIMIT 1" in probe and "COUNT(" not in probe, probe
    assert at_limit(alice, 2) is counts
    assert not at_limit(alice, 3)
    assert at_limit(alice, 0)
    outstanding = Attachment.objects.outstanding_uploads(tenant_id=alice.membership.tenant_id, subject="alice", now=now)
    assert list(outstanding.order_by("storage_key").values_list("storage_key", flat=True)) == [f"k/{alice.pk}/1"] + (
        [f"k/{alice.pk}/2"] if counts else []
    )
    assert at_limit(bob, 1) and not at_limit(bob, 2)


# --- status read and gated download ---------------------------------------------


@pytest.fixture
def ready_id(alice, api):
    attachment_id = upload(api(alice), jpeg_bytes())
    assert run_pipeline(attachment_id) == "ready"
    return attachment_id


def test_status_read_is_two_queries(alice, bob, api, ready_id):
    for user in (alice, bob):  # the owner, and the same tenant seeing a ready one
        sqls = _queries(lambda: api(user).get(f"/api/v1/attachments/{ready_id}"))
        # Token+user+tenant, then the row: the resource never loads a deferred field.
        assert len(sqls) == 2, sqls
        assert '"text"' not in sqls[1]  # Attachment.objects.for_resource()
    pending = upload(api(alice), jpeg_bytes())
    assert len(_queries(lambda: api(alice).get(f"/api/v1/attachments/{pending}"))) == 2


def test_download_is_two_queries(alice, api, ready_id):
    assert len(_queries(lambda: api(alice).get(f"/api/v1/attachments/{ready_id}/download"))) == 2


def test_status_read_body_is_unchanged_by_the_narrow_row(alice, api, ready_id):
    body = api(alice).get(f"/api/v1/attachments/{ready_id}").json()
    row = Attachment.objects.get(pk=ready_id)
    assert body["status"] == "ready" and body["size"] == row.size and body["sha256"] == row.sha256
    assert body["content_type"] == row.content_type and body["metadata"]["width"] == row.metadata["width"]
    assert set(body["links"]) == {"self", "download", "thumbnail", "variants"}
    assert body["derivatives"]["thumbnail"] == {
        "width": row.metadata["thumbnail"]["width"],
        "height": row.metadata["thumbnail"]["height"],
    }


def test_soft_deleted_and_other_tenants_rows_are_not_found(alice, mallory, api, ready_id):
    assert api(mallory).get(f"/api/v1/attachments/{ready_id}").status_code == 404
    Attachment.objects.filter(pk=ready_id).update(lifecycle=Lifecycle.DELETED, deleted_at=timezone.now())
    for path in (f"/api/v1/attachments/{ready_id}", f"/api/v1/attachments/{ready_id}/download"):
        response = api(alice).get(path)
        assert response.status_code == 404 and response.json()["error"]["code"] == "NOT_FOUND"
