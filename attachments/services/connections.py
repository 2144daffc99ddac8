"""Letting go of the database connection while a request does something other than query.

On PostgreSQL each web process shares a pool of AIRLOCK_DB_POOL.max
connections between all its request threads. A request that kept the one it
took at authentication until its response was written would hold it through
its storage calls too: in a burst of S3 uploads, seconds of holding for a few
milliseconds of queries, and the queue behind the pool answers 503. So it is
given back before storage calls, a streamed body and the response's write;
the next query takes one again.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection
from django.http import HttpRequest, HttpResponse


def give_connection_back() -> None:
    """Hold no database connection until the next query (the pool is shared by every request).

    Not inside a transaction. Not on SQLite: its connection is a file
    handle of this thread, scarce to nobody, and closing it costs a checkpoint
    of the write-ahead log and a reopen, a good share of a tus PATCH's fixed cost.
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
