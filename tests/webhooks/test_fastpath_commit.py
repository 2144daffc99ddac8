"""Delivery bookkeeping (services/fastpath_commit.py) commits without the WAL flush, only there."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from bench import switches
from webhooks.services.fastpath_commit import bookkeeping

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _synchronous_commit() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return cursor.fetchone()[0]


def test_bookkeeping_commits_asynchronously_and_nothing_else_does():
    assert connection.vendor == "postgresql", "needs DATABASE_URL on PostgreSQL"
    with bookkeeping():
        assert _synchronous_commit() == "off"
    with transaction.atomic():
        assert _synchronous_commit() == "on"  # SET LOCAL: the next transaction waits for the disk


def test_the_bench_switch_turns_it_off():
    from webhooks.services import delivery

    with switches.off("webhook_async_commit"), delivery.bookkeeping():
        assert _synchronous_commit() == "on"
    with delivery.bookkeeping():
        assert _synchronous_commit() == "off"  # on again after the block
