"""A dependency that does not answer is a 503 with Retry-After, wherever the error surfaces.

The DRF exception handler and the Django 500 handler (for plain views and
middleware) both ask `outage_response`; anything it does not recognise stays a 500.
"""

from __future__ import annotations

import logging

from django.http import JsonResponse, UnreadablePostError

from .http import error_body

log = logging.getLogger("airlock.api")


def _outage_types() -> tuple[type[BaseException], ...]:
    import dramatiq.errors
    import redis.exceptions
    from django.db import DatabaseError, InterfaceError

    from ..storage.base import StorageError

    broker = getattr(dramatiq.errors, "BrokerConnectionError", None) or dramatiq.errors.ConnectionError
    found: list[type[BaseException]] = [
        DatabaseError,
        InterfaceError,
        StorageError,
        broker,
        redis.exceptions.ConnectionError,
        redis.exceptions.TimeoutError,
    ]
    try:
        from psycopg_pool import PoolTimeout

        found.append(PoolTimeout)
    except ImportError:  # pragma: no cover - psycopg-pool is a dependency
        pass
    return tuple(found)


def _body_errors() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """(client stopped sending, client too slow): errors reading the request body."""
    try:
        from gunicorn.http.errors import NoMoreData

        ended: tuple[type[BaseException], ...] = (NoMoreData,)
    except ImportError:  # pragma: no cover - gunicorn is a dependency
        ended = ()
    return ended, (TimeoutError,)


# A dependency outage's Retry-After: a few seconds, so clients come back soon after it heals
# (a down scanner or storage is usually back within a minute) without hammering meanwhile.
RETRY_AFTER_SECONDS = 5


def retry_after() -> str:
    return str(RETRY_AFTER_SECONDS)


def outage_response(exc: BaseException | None) -> JsonResponse | None:
    while isinstance(exc, UnreadablePostError) and exc.__cause__ is not None:
        exc = exc.__cause__  # Django wraps the body reader's error (twice): what the reader said counts
    if exc is None:
        return None
    if isinstance(exc, _outage_types()):
        log.warning("dependency unavailable", extra={"error": f"{type(exc).__name__}: {exc}"[:300]})
        response = JsonResponse(error_body("UNAVAILABLE", "A dependency is unavailable; try again."), status=503)
        response["Retry-After"] = retry_after()
        return response
    ended, slow = _body_errors()
    if isinstance(exc, ended):
        return JsonResponse(
            error_body("VALIDATION_ERROR", "The request body ended before its Content-Length."), status=400
        )
    if isinstance(exc, slow):
        response = JsonResponse(error_body("REQUEST_TIMEOUT", "The request body stopped arriving."), status=408)
        response["Connection"] = "close"
        return response
    return None
