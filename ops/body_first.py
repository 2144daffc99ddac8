"""Read a small request body before the view takes a database connection.

A view authenticates (one query, and a pooled connection checked out until the
response is sent) before it parses the body. A client that sent its headers and
then trickled the body, a byte at a time inside the body timeout, held that
connection as long as it liked: on PostgreSQL with a pool of 2, two such
clients made the next intent wait AIRLOCK_DB_POOL_TIMEOUT_SECONDS and answer
503. Bodies up to DATA_UPLOAD_MAX_MEMORY_SIZE are read here instead, once the
view is known and before it runs (nothing has queried yet), into the memory
Django would give them anyway. Views whose class says `streams_body = True`
(the signed PUT, tus, upload-through) read their bodies themselves and let go
of their connection first (attachments/services/connections.py).

Under `serve` such a body is already in memory when a thread takes the request:
the worker gathers it in its selector under a total deadline
(ops/httpintake.py), so a trickling client holds no thread either. This
middleware keeps the rule for any other WSGI server.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import unquote

from django.conf import settings
from django.http import HttpRequest, HttpResponse, UnreadablePostError
from django.urls import Resolver404, resolve

from attachments.api.errors import json_error
from attachments.api.http import content_length
from attachments.api.outages import outage_response
from attachments.errors import ValidationFailed


def streams_body(view_func) -> bool:
    """Whether the view reads its body itself, as it arrives (and so must not have it read before it runs)."""
    return bool(getattr(getattr(view_func, "view_class", None), "streams_body", False))


def path_streams_body(path: str) -> bool:
    """streams_body() of the view a request path resolves to (False for a path no view serves)."""
    try:
        return streams_body(resolve(unquote(path)).func)
    except Resolver404:
        return False


class BodyFirstMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view_func, view_args, view_kwargs) -> HttpResponse | None:
        if streams_body(view_func):
            return None
        try:
            length = content_length(request)
        except ValidationFailed:
            return None  # the view refuses it, with its own error
        if length and length <= settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
            try:
                request.body  # noqa: B018  (read and kept: the view reads it from memory)
            except UnreadablePostError as exc:
                cause: BaseException | None = exc
                while isinstance(cause, UnreadablePostError):  # Django wraps the reader's error, twice
                    cause = cause.__cause__
                # As anywhere else: stopped arriving is a 408, ended early a 400 (attachments/api/outages.py).
                return outage_response(cause) or json_error(
                    ValidationFailed(
                        "The request body could not be read.", details={"Content-Length": ["The body is shorter."]}
                    )
                )
        return None
