"""config/postgresql's pool property is Django 5.2's own with DeadlinePool: it follows Django's.

Django's `DatabaseWrapper.pool` hard-codes psycopg_pool.ConnectionPool and passes
`check=` itself (so even a `check` in OPTIONS["pool"] is a TypeError before Django
ticket #37075); choosing the pool class means copying the property. The copy leans
on Django's private `_connection_pools` and `_configure_connection`: when Django
changes its property, this fails, and config/postgresql/base.py is re-synced.
"""

from __future__ import annotations

import hashlib
import inspect
import time

import django
import psycopg
import pytest
from django.db import connection
from django.db.backends.postgresql import base as django_base
from psycopg_pool import ConnectionPool

from config.postgresql.base import DatabaseWrapper, DeadlinePool

# sha256 of Django 5.2's `pool` property source, as copied into config/postgresql/base.py.
DJANGO_POOL_SOURCE_SHA256 = "e5c2654fdf2d50900fec9db41948d0b026da988e24d0eba1b4b9a9d4aacb1b17"


def test_django_pool_property_is_the_one_we_copied():
    assert django.VERSION[:2] == (5, 2), "pyproject pins Django 5.2; re-check config/postgresql"
    source = inspect.getsource(django_base.DatabaseWrapper.pool.fget)
    assert hashlib.sha256(source.encode()).hexdigest() == DJANGO_POOL_SOURCE_SHA256, (
        "Django's DatabaseWrapper.pool changed: copy it again into config/postgresql/base.py "
        "(keeping DeadlinePool) and update the pinned hash"
    )
    assert "_connection_pools" in source and "self._configure_connection" in source
    assert isinstance(DatabaseWrapper.__dict__["pool"], property)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_backend_pools_with_the_deadline_pool_and_psycopgs_own_check():
    assert connection.pool is not None, "the real settings pool PostgreSQL connections"
    assert isinstance(connection.pool, DeadlinePool)
    assert connection.pool._check is ConnectionPool.check_connection  # as Django's own property


def _pooled_backend_pid() -> int:
    connection.close()  # back to the pool; the next query checks one out
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_connection_whose_backend_was_terminated_is_replaced_not_handed_out():
    pid = _pooled_backend_pid()
    connection.close()
    with psycopg.connect(**connection.pool.kwargs) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        for _ in range(200):  # until the backend has exited
            if not admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone():
                break
            time.sleep(0.01)
    assert _pooled_backend_pid() != pid  # psycopg's check found it dead: the pool opened another
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)
    connection.close()
