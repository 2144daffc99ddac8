"""The id of the request being served (or of the request that caused the job being run).

Set by ops.logging.RequestIdMiddleware for web requests and by
processing.request_context for jobs; the outbox stores it with each job, and
every JSON log line carries it.
"""

from __future__ import annotations

import contextvars

_request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("airlock_request_id", default=None)


def current_request_id() -> str | None:
    return _request_id.get()


def set_request_id(value: str | None) -> contextvars.Token:
    return _request_id.set(value)


def reset_request_id(token: contextvars.Token) -> None:
    _request_id.reset(token)
