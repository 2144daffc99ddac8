"""Django's PostgreSQL backend with a pool a request queues in until its deadline (DeadlinePool).

DeadlinePool: psycopg's pool waits `timeout` for a free connection, then
fails (a 503). A burst on a busy machine (200 clients, 2 cores shared with
other work) queues longer than any fixed wait that still reports an outage
quickly: 134 of 200 intents were refused after 5 s while the pool was
handing connections out all along. So a request whose wait ran out while
no connection failed (the database serves, it is only busy) goes on waiting
until its deadline (AIRLOCK_DB_POOL.request_deadline_seconds); a wait during which
connects failed or connections broke is an outage, answered as before.

Why the `pool` property is copied: Django 5.2's builds psycopg_pool.ConnectionPool
itself, with no setting for the pool class (and it passes `check=` itself, so even
a `check` in OPTIONS["pool"] is a TypeError: Django ticket #37075, fixed after
5.2). Choosing the class means copying the property; it is Django 5.2's, with
DeadlinePool in place of ConnectionPool and nothing else changed. It uses
Django's private `_connection_pools` and `_configure_connection`, so
tests/ops/test_db_pool_class.py pins the source of Django's property: a Django
that changes it fails there, and this copy is re-synced. psycopg's own health
check stays: a cheaper check bought nothing on the status read or the intent.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db.backends.base.base import NO_DB_ALIAS
from django.db.backends.postgresql import base
from psycopg import Connection
from psycopg_pool import ConnectionPool, PoolTimeout

from . import deadline


class DeadlinePool(ConnectionPool):
    """A request waits for a busy pool until its deadline.

    A wait that saw connections fail is an outage.
    """

    _TROUBLE = ("connections_errors", "connections_lost", "returns_bad")

    def __init__(self, *args: Any, request_deadline: float = 0.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.request_deadline = request_deadline

    def trouble(self) -> int:
        """Failed connects and broken connections so far (psycopg's own counters)."""
        stats = self.get_stats()
        return sum(stats.get(name, 0) for name in self._TROUBLE)

    def getconn(self, timeout: float | None = None) -> Connection:
        if timeout is not None or self.request_deadline <= 0 or deadline.seconds_left(0.0) is None:
            return super().getconn(timeout)  # a caller's own wait, or no request (jobs, commands)
        trouble = self.trouble()
        try:
            return super().getconn()
        except PoolTimeout:
            left = deadline.seconds_left(self.request_deadline)
            if left is None or left <= 0 or self.trouble() != trouble:
                raise  # not in a request, past its deadline, or the database is failing: 503 now
        return super().getconn(left)


class DatabaseWrapper(base.DatabaseWrapper):
    @property
    def pool(self):
        pool_options = self.settings_dict["OPTIONS"].get("pool")
        if self.alias == NO_DB_ALIAS or not pool_options:
            return None
        if self.alias not in self._connection_pools:
            if self.settings_dict.get("CONN_MAX_AGE", 0) != 0:
                raise ImproperlyConfigured("Pooling doesn't support persistent connections.")
            if pool_options is True:
                pool_options = {}
            connect_kwargs = self.get_connection_params()
            connect_kwargs["autocommit"] = True  # Django sets it properly later on
            enable_checks = self.settings_dict["CONN_HEALTH_CHECKS"]
            pool = DeadlinePool(  # the one change from Django 5.2's property
                kwargs=connect_kwargs,
                open=False,
                configure=self._configure_connection,
                check=ConnectionPool.check_connection if enable_checks else None,
                **pool_options,
            )
            self._connection_pools.setdefault(self.alias, pool)  # the first of racing threads wins
        return self._connection_pools[self.alias]
