"""Answers `serve` writes itself, before or without the application, in the contract's JSON error shape.

gunicorn refuses a malformed request (bad request line, headers too large, a
Transfer-Encoding it does not implement) with an HTML page of its own; our
worker (ops/httpserver.py) answers with these instead, with the same status.
The deadlines and per-address limits of the worker answer from here too.
"""

from __future__ import annotations

import json
import ssl
import uuid
from http import HTTPStatus

from gunicorn.http import errors as g

# (exception types, status, contract code); the first that matches wins.
_REFUSALS: tuple[tuple[tuple[type[BaseException], ...], int, str], ...] = (
    ((g.InvalidResponseHeader, g.InvalidResponseHeaderName, g.ConfigurationProblem), 500, "INTERNAL"),
    ((g.LimitRequestLine,), 414, "ERROR"),
    ((g.LimitRequestHeaders,), 431, "ERROR"),
    ((g.UnsupportedTransferCoding,), 501, "ERROR"),
    ((g.ExpectationFailed,), 417, "ERROR"),
    ((g.ForbiddenProxyRequest,), 403, "ERROR"),
    ((g.ParseException, ssl.SSLError), 400, "VALIDATION_ERROR"),
)

_MESSAGES = {
    400: "The request could not be parsed.",
    403: "The request is not allowed from this address.",
    414: "The request line is too long.",
    417: "The Expect header is not supported.",
    431: "The request headers are too large.",
    500: "Internal error.",
    501: "The request's Transfer-Encoding is not supported.",
}


def refusal_of(exc: BaseException) -> tuple[int, str]:
    """(status, contract code) for an error gunicorn raised while reading a request."""
    for types, status, code in _REFUSALS:
        if isinstance(exc, types):
            return status, code
    return 500, "INTERNAL"


def refusal_for(exc: BaseException) -> bytes:
    status, code = refusal_of(exc)
    details = {} if status == 500 else {"reason": str(exc)[:200]}
    return response(status, code, _MESSAGES[status], details)


def response(
    status: int, code: str, message: str, details: dict | None = None, headers: dict[str, str] | None = None
) -> bytes:
    """A whole HTTP/1.1 response that closes the connection."""
    body = json.dumps({"error": {"code": code, "message": message, "details": details or {}}}).encode()
    lines = [
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
        "Connection: close",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        f"X-Request-ID: {uuid.uuid4().hex}",
        *(f"{k}: {v}" for k, v in (headers or {}).items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def body_timeout() -> bytes:
    return response(408, "REQUEST_TIMEOUT", "The request body did not arrive in time.")


def too_many_connections(limit: int, retry_after: int) -> bytes:
    return response(
        429,
        "RATE_LIMITED",
        "Too many connections from this address.",
        {"limit": limit},
        {"Retry-After": str(retry_after)},
    )
