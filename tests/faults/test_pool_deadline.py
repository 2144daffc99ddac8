"""The pool on PostgreSQL: a request queues for a busy connection until its deadline, an outage answers at once.

A fixed AIRLOCK_DB_POOL_TIMEOUT_SECONDS wait turned a burst on a busy machine
into 503s while the pool was handing connections out all along
(tests/e2e/test_burst_s3.py). Within a request (Django's request_started ..
request_finished) the wait goes on while no connection fails, up to
AIRLOCK_REQUEST_DEADLINE_SECONDS from the request's start; outside a request,
or when connecting fails, the pool's own timeout applies.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.core.signals import request_finished, request_started
from django.db import connection
from psycopg_pool import PoolTimeout

from config.postgresql.base import DeadlinePool
from tests.support.processes import free_port

pytestmark = [pytest.mark.postgres]


def _params(**override) -> dict:
    params = connection.get_connection_params()
    for name in ("cursor_factory", "context", "prepare_threshold"):
        params.pop(name, None)
    return {**params, **override}


@contextmanager
def _pool(*, deadline: float, timeout: float = 0.5, **params) -> Iterator[DeadlinePool]:
    pool = DeadlinePool(
        kwargs=_params(**params),
        min_size=0,
        max_size=1,
        timeout=timeout,
        reconnect_timeout=0.5,
        request_deadline=deadline,
        open=True,
    )
    try:
        yield pool
    finally:
        pool.close()


@contextmanager
def _request() -> Iterator[None]:
    """What Django's handler does around a request."""
    request_started.send(sender=None, environ={})
    try:
        yield
    finally:
        request_finished.send(sender=None)


@pytest.fixture
def needs_postgresql(db):
    if connection.vendor != "postgresql":
        pytest.fail("needs DATABASE_URL on PostgreSQL")


def test_a_request_waits_past_the_pool_timeout_while_the_only_connection_is_busy(needs_postgresql):
    with _pool(deadline=10.0, timeout=0.5) as pool:
        busy = pool.getconn()
        # Busy for twice the pool's timeout, then given back (the other request finished).
        releaser = threading.Timer(1.0, pool.putconn, args=(busy,))
        releaser.start()
        started = time.monotonic()
        with _request():
            conn = pool.getconn()
        waited = time.monotonic() - started
        releaser.join()
        assert conn.execute("SELECT 1").fetchone() == (1,)
        pool.putconn(conn)
    assert 0.5 < waited < 10.0


def test_past_its_deadline_a_request_gets_the_pool_timeout(needs_postgresql):
    with _pool(deadline=1.5, timeout=0.5) as pool:
        busy = pool.getconn()
        started = time.monotonic()
        with _request(), pytest.raises(PoolTimeout):
            pool.getconn()
        waited = time.monotonic() - started
        pool.putconn(busy)
    assert 1.4 < waited < 5.0  # the deadline, not the 0.5 s timeout, and not forever


def test_outside_a_request_the_pool_timeout_applies(needs_postgresql):
    with _pool(deadline=10.0, timeout=0.5) as pool:
        busy = pool.getconn()
        started = time.monotonic()
        with pytest.raises(PoolTimeout):
            pool.getconn()
        waited = time.monotonic() - started
        pool.putconn(busy)
    assert waited < 5.0


def test_a_database_that_refuses_connections_is_an_outage_at_once_even_in_a_request(needs_postgresql):
    with _pool(deadline=30.0, timeout=1.0, host="127.0.0.1", port=free_port()) as pool:
        started = time.monotonic()
        with _request(), pytest.raises(PoolTimeout):
            pool.getconn()
        waited = time.monotonic() - started
    assert waited < 10.0  # the 1 s timeout (a 503 now), not the 30 s deadline
