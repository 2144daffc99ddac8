"""The console's ref prefix search is an index range scan on PostgreSQL (#32 Find; migration 0021).

Real mode only: the index is varchar_pattern_ops, which SQLite does not have. A test
table of a few rows is cheaper to read whole, so sequential scans are priced out for the
EXPLAIN (enable_seqscan off): the test asks whether the planner *can* answer the search
from the index, which is what a table of millions of rows relies on.
"""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from attachments.admin.finding import search_query
from attachments.models import Attachment
from tests.support import client_for, jpeg_bytes, run_pipeline, upload

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def _plan(queryset) -> str:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        return queryset.explain()


def test_a_ref_prefix_search_uses_the_ref_index(alice):
    assert connection.vendor == "postgresql"
    pk = upload(client_for(alice), jpeg_bytes((40, 30)), filename="smith.jpg")
    assert run_pipeline(pk) == "ready"
    Attachment.objects.filter(pk=pk).update(ref="wedding:smith-2026")
    found = Attachment.objects.filter(search_query("ref:wedding:smith"))
    assert [str(p) for p in found.values_list("pk", flat=True)] == [str(pk)]
    plan = _plan(found)
    assert "att_ref_prefix" in plan, plan
    assert "~>=~" in plan and "~<~" in plan, plan  # a range on the pattern operators, not a filter over all rows


def test_the_same_ref_link_uses_the_ref_index_too(alice):
    plan = _plan(Attachment.objects.filter(ref__exact="wedding:smith-2026"))
    assert "att_ref_prefix" in plan, plan
