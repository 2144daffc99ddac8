"""Letting go of the database connection while a request does something other than query.

On PostgreSQL each web process shares a pool of AIRLOCK_DB_POOL_MAX
connections between all its request threads. A request kept the one it took
at authentication until its response was written, storage calls included:
in a burst of 200 S3 uploads on a busy 2-core machine a connection's median
hold was 4.0 s for a few milliseconds of queries, and the queue behind the
pool answered 503. Give it back before storage calls, a streamed body and the
response's write; the next query takes one again.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection
from django.http import HttpRequest, HttpResponse


def give_connection_back() -> None:
    """Hold no database connection until the next query (the pool is shared by every request).

    Not inside a transaction. Not on SQLite: its connection is a file
    handle of this thread, scarce to nobody, and closing it costs a checkpoint
    of the write-ahead log and a reopen, 13 % of a tus PATCH's time (py-spy):
    the fixed cost of a PATCH went from 11.1 to 8.8 ms without it (30 MiB in
    1 MiB PATCHes, embedded serve).
    """
    if connection.vendor != "sqlite" and not connection.in_atomic_block:
        connection.close()


class ReleaseBeforeResponseMiddleware:
    """Outermost middleware: the connection goes back once the response is built, before it is sent."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        give_connection_back()
        return response
