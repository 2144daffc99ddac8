"""The intent's one-statement INSERT (attachments/uploads/services/fastpath_insert.py) still applies on this Django.

With and without it an intent counts the same.

The rewrite splits Django's compiled INSERT at " VALUES (" and silently falls back to
the transaction when the shape differs: these fail loudly instead, so a Django
upgrade that changes InsertQuery/UpdateQuery or the SQL they compile is seen here,
not as a slower intent in a noisy benchmark.
"""

from __future__ import annotations

import django
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from attachments.models import Attachment, TenantUsage, TransitionLog
from attachments.uploads.services.fastpath_insert import _insert_sql
from bench import switches
from tests.support import create_intent

pytestmark = pytest.mark.django_db


def test_django_is_the_major_the_rewrite_was_tested_on():
    assert django.VERSION[:2] == (5, 2), "pyproject pins Django 5.2; re-check fastpath_insert.py"


def test_compiled_inserts_have_the_shape_the_rewrite_splits(alice):
    row = Attachment(
        tenant=alice.membership.tenant,
        owner=alice,
        profile="image",
        filename="a.jpg",
        declared_size=1,
        declared_type="image/jpeg",
        storage_key="k/a",
    )
    entry = TransitionLog(attachment_id=row.pk, transition="intent")
    for model_row, with_pk in ((row, True), (entry, False)):
        parts = _insert_sql(model_row, with_pk=with_pk)
        assert parts is not None, "Django's compiled INSERT no longer splits at ' VALUES ('"
        head, values, params = parts
        assert head.upper().startswith("INSERT INTO ") and values.count("%s") == len(params)


@pytest.mark.postgres
def test_an_intent_on_postgresql_is_the_one_statement(alice, api):
    assert connection.vendor == "postgresql", "needs DATABASE_URL on PostgreSQL"
    client = api(alice)
    assert create_intent(client).status_code == 201  # the counter exists from here on
    with CaptureQueriesContext(connection) as ctx:
        assert create_intent(client).status_code == 201
    [statement] = [
        q["sql"] for q in ctx.captured_queries if "attachments_attachment" in q["sql"] and "INSERT" in q["sql"].upper()
    ]
    assert statement.upper().startswith('WITH ROOM AS (UPDATE "ATTACHMENTS_TENANTUSAGE"'), statement
    with switches.off("insert_reserving"), CaptureQueriesContext(connection) as ctx:
        assert create_intent(client).status_code == 201
    assert not any(q["sql"].upper().startswith("WITH ROOM") for q in ctx.captured_queries)  # the bench's "without"


@pytest.mark.parametrize("switch", ["", "insert_reserving"])
def test_with_and_without_it_an_intent_counts_the_same(alice, api, switch):
    client = api(alice)
    with switches.off(switch):  # the bench's switch: the transaction path
        for _ in range(3):
            assert create_intent(client).status_code == 201
    usage = TenantUsage.objects.get(tenant=alice.membership.tenant)
    assert usage.files_used == 3 and usage.bytes_used == 3 * 100
    assert TransitionLog.objects.filter(transition="intent").count() == 3
