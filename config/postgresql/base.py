"""Django's PostgreSQL backend: a cheaper pool check, and a pool a request queues in until its deadline.

With CONN_HEALTH_CHECKS, Django's pool runs psycopg's check (an empty query,
one round trip) on every checkout, that is on every request: 15 % of a
`serve` web process's samples on the status read (py-spy), 0.5 ms of CPU per
request in-process (2.8 -> 2.3 ms). An idle pooled connection receives
nothing until the server goes away: a restart or a terminated backend sends
an error and closes, which makes the socket readable. So the check looks at
the socket (no round trip) and runs psycopg's check only when something
arrived; a dead connection is then discarded and replaced, as before.
The `pool` property is Django 5.2's own, with that check and DeadlinePool.

DeadlinePool: psycopg's pool waits `timeout` for a free connection, then
fails (a 503). A burst on a busy machine (200 clients, 2 cores shared with
other work) queues longer than any fixed wait that still reports an outage
quickly: 134 of 200 intents were refused after 5 s while the pool was
handing connections out all along. So a request whose wait ran out while
no connection failed (the database serves, it is only busy) goes on waiting
until its deadline (AIRLOCK_REQUEST_DEADLINE_SECONDS); a wait during which
connects failed or connections broke is an outage, answered as before.
"""

from __future__ import annotations

import select
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db.backends.base.base import NO_DB_ALIAS
from django.db.backends.postgresql import base
from psycopg import Connection
from psycopg_pool import ConnectionPool, PoolTimeout

from . import deadline


def check_connection(conn: Connection) -> None:
    """Raise if the connection is unusable; a round trip only when the socket is readable or closed."""
    if not (conn.closed or conn.broken):
        try:
            readable, _, _ = select.select([conn.fileno()], [], [], 0)
        except (OSError, ValueError):
            readable = [True]
        if not readable:
            return
    ConnectionPool.check_connection(conn)


class DeadlinePool(ConnectionPool):
    """A request waits for a busy pool until its deadline; a wait that saw connections fail is an outage."""

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
            pool = DeadlinePool(
                kwargs=connect_kwargs,
                open=False,
                configure=self._configure_connection,
                check=check_connection if self.settings_dict["CONN_HEALTH_CHECKS"] else None,
                **pool_options,
            )
            self._connection_pools.setdefault(self.alias, pool)  # the first of racing threads wins
        return self._connection_pools[self.alias]
