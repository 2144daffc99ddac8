"""The pool's connection check (config/postgresql): no round trip while the server is up, a fresh connection after it dropped one."""

from __future__ import annotations

import time

import psycopg
import pytest
from django.db import connection

from config.postgresql.base import check_connection

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _pooled_backend_pid() -> int:
    connection.close()  # back to the pool; the next query checks one out
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def test_the_backend_checks_pooled_connections_with_the_socket_check():
    assert connection.pool is not None, "the real settings pool PostgreSQL connections"
    assert connection.pool._check is check_connection


def test_a_healthy_idle_connection_is_handed_out_without_a_query():
    raw = psycopg.connect(**connection.pool.kwargs)
    try:
        sent = []
        real_execute = raw.execute
        raw.execute = lambda *a, **kw: sent.append(a) or real_execute(*a, **kw)  # type: ignore[method-assign]
        check_connection(raw)
        assert sent == [], "the check asked the server although nothing arrived on the socket"
    finally:
        raw.close()


def test_a_connection_whose_backend_was_terminated_is_replaced_not_handed_out():
    pid = _pooled_backend_pid()
    connection.close()
    with psycopg.connect(**connection.pool.kwargs) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        for _ in range(200):  # until the backend has exited (and so has told its client)
            if not admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone():
                break
            time.sleep(0.01)
    # The server said goodbye on the idle connection: the check sees it and the pool opens another.
    assert _pooled_backend_pid() != pid
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)
    connection.close()
