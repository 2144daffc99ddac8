"""Keep credentials out of what the client says: exception messages, their repr, log lines.

Signed URLs carry their credential in the query (Airlock's `token`, a download's
`sig`, S3's `X-Amz-Signature`, `X-Amz-Credential`, `X-Amz-Security-Token`),
and host apps log exceptions whole. So a URL in a message loses its query, and
any text the client passes on (an answer's body, a transport error) has those
parameters and Authorization values masked.
"""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

MASK = "[redacted]"
_SECRET_NAMES = r"token|sig|signature|x-amz-[a-z0-9-]+"
# name=value in a query string or a form (also XML-escaped: &amp;name=value).
_PARAM = re.compile(rf"(?i)(?<![a-z0-9])({_SECRET_NAMES})=[^&\s'\"<>;]*")
# A header written out ("Authorization: Token abc", "'authorization': 'Bearer x'"): its whole value.
_AUTHORIZATION = re.compile(r"(?i)\b((?:proxy-)?authorization)(['\"]?\s*[:=]\s*['\"]?)[^'\"\r\n,}&<]*")
# An S3 credential sent as a header ("X-Amz-Security-Token: …").
_AMZ_HEADER = re.compile(r"(?i)\b(x-amz-(?:security-token|credential|signature))(['\"]?\s*:\s*['\"]?)[^'\"\s,}&<]*")
# A URL's query, in free text: everything from "?" to the end of the URL.
_URL_QUERY = re.compile(r"(?i)\b(https?://[^\s?#'\"<>]*)\?[^\s#'\"<>]*")


def safe_url(url: object) -> str:
    """`url` without its query (the part that carries signatures and tokens) or fragment."""
    text = str(url)
    try:
        parts = urlsplit(text)
    except ValueError:
        return redact(text)
    if not parts.query and not parts.fragment:
        return text
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "…" if parts.query else "", ""))


def redact(text: str) -> str:
    """`text` with URL queries dropped and secret parameters and Authorization values masked."""
    text = _URL_QUERY.sub(r"\1?…", text)
    text = _AUTHORIZATION.sub(rf"\1\2{MASK}", text)
    text = _AMZ_HEADER.sub(rf"\1\2{MASK}", text)
    return _PARAM.sub(rf"\1={MASK}", text)


def redact_value(value: Any) -> Any:
    """A JSON-like value with every string in it redacted (an error's `details`)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: redact_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(item) for item in value]
    return value


def scrub(error: BaseException) -> BaseException:
    """`error` with its message, and those of the errors it was raised from, redacted (a traceback prints them)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current.args = tuple(redact(arg) if isinstance(arg, str) else arg for arg in current.args)
        current = current.__cause__ or current.__context__
    return error


class RedactingFilter(logging.Filter):
    """Redacts a record's rendered message (httpx logs every request's full URL at INFO)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


_FILTER = RedactingFilter()


def redact_httpx_logs() -> None:
    """Install the filter on httpx's logger (idempotent): its request lines carry signed URLs."""
    logger = logging.getLogger("httpx")
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
