"""Structured JSON logs (credentials redacted) and the middleware that gives each request its id."""

from __future__ import annotations

import json
import logging
import re
import uuid
from datetime import UTC, datetime

from attachments.request_id import current_request_id, reset_request_id, set_request_id

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


# Credentials that travel in URLs and headers: upload tokens (`?token=`), the
# signatures of delivery links (`?sig=`), S3 presigned signatures, and Authorization headers (API tokens, the events and
# metrics tokens). Matched in the finished line, so no path into a log (a
# message, an argument, an extra field, a traceback) can carry one out.
_QUERY_SECRET = re.compile(
    r"(?i)((?:[?&;]|%3F|%26)(?:token|access_token|sig|signature|x-amz-signature|x-amz-credential"
    r"|x-amz-security-token)(?:=|%3D))[^&\s\"'#\\]+"
)
_AUTH_HEADER = re.compile(
    r"(?i)((?:authorization|x-amz-security-token)\\?[\"']?\s*[:=]\s*\\?[\"']?)"
    r"(?:(token|bearer|basic|digest)\s+)?[^\"'\s,;}\\]+"
)
REDACTED = "[redacted]"


def redact(text: str) -> str:
    """`text` with every credential-shaped value replaced by [redacted]."""
    text = _QUERY_SECRET.sub(lambda m: m.group(1) + REDACTED, text)
    return _AUTH_HEADER.sub(lambda m: m.group(1) + (f"{m.group(2)} " if m.group(2) else "") + REDACTED, text)


def _loggable(value: object) -> object:
    # django.request passes the request itself as an extra: its repr is the full URL.
    if hasattr(value, "method") and hasattr(value, "path") and hasattr(value, "META"):
        return f"{value.method} {value.path}"
    return value


class JsonFormatter(logging.Formatter):
    """One JSON object per line; extra= fields become top-level keys; credentials redacted."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        request_id = current_request_id()
        if request_id:
            payload["request_id"] = request_id
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                payload[key] = _loggable(value)
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return redact(json.dumps(payload, default=str))


class RequestIdMiddleware:
    """Take X-Request-ID from the client (if sane) or mint one; echo it back."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        incoming = request.headers.get("X-Request-ID", "")
        rid = incoming if incoming and len(incoming) <= 64 and incoming.replace("-", "").isalnum() else uuid.uuid4().hex
        token = set_request_id(rid)
        try:
            response = self.get_response(request)
        finally:
            reset_request_id(token)
        response["X-Request-ID"] = rid
        return response
