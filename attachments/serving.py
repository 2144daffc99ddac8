"""The gated read: build the file response once the selector said yes."""

from __future__ import annotations

import re
from typing import Literal, TypeVar
from urllib.parse import quote

from django.conf import settings
from django.http import HttpResponse, HttpResponseRedirect, StreamingHttpResponse
from django.http.response import HttpResponseBase

from .storage import get_gateway

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
CSP = "default-src 'none'; sandbox"
_Response = TypeVar("_Response", bound=HttpResponseBase)


def content_disposition(kind: str, filename: str) -> str:
    ascii_name = "".join(c if 32 <= ord(c) < 127 and c not in '"\\;' else "_" for c in filename) or "file"
    return f"{kind}; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(filename, safe='')}"


def _security_headers(response: _Response) -> _Response:
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = CSP
    response["Cache-Control"] = "private, no-store"
    return response


def _position(digits: str) -> int:
    # Past any object's size anyway; int() refuses more than 4300 digits (ValueError).
    return int(digits) if len(digits) <= 18 else 10**18


def _parse_range(header: str, size: int) -> tuple[int, int] | None | Literal[False]:
    """(start, end) for one satisfiable range, None for no/ignored range, False if unsatisfiable."""
    match = _RANGE.match(header.strip()) if header else None
    if not match:
        return None
    first, last = match.groups()
    if first == "" and last == "":
        return None
    if first == "":
        length = _position(last)
        if length == 0:
            return False
        return max(0, size - length), size - 1
    start = _position(first)
    end = _position(last) if last else size - 1
    if start >= size or end < start:
        return False
    return start, min(end, size - 1)


def served_object(attachment) -> tuple[str, int] | None:
    """The key and size of what a download serves, or None while there are no bytes yet."""
    if attachment.served_key and attachment.size is not None:
        return attachment.served_key, attachment.size
    # Before processing described it (the owner's pending file): ask storage.
    info = get_gateway().head(attachment.working_key)
    return None if info is None else (attachment.working_key, info.size)


def file_response(request, *, key: str, size: int, content_type: str, filename: str, inline: bool) -> HttpResponseBase:
    disposition = content_disposition("inline" if inline else "attachment", filename)
    content_type = content_type or "application/octet-stream"
    gateway = get_gateway()
    url = gateway.presign_download(
        key, content_type=content_type, disposition=disposition, expires_in=settings.AIRLOCK_DOWNLOAD_URL_SECONDS
    )
    if url is not None:
        return _security_headers(HttpResponseRedirect(url))
    response: HttpResponse | StreamingHttpResponse
    if settings.AIRLOCK_X_ACCEL_REDIRECT_PREFIX:
        response = HttpResponse(content_type=content_type)
        response["X-Accel-Redirect"] = settings.AIRLOCK_X_ACCEL_REDIRECT_PREFIX.rstrip("/") + "/" + key
    else:
        byte_range = _parse_range(request.headers.get("Range", ""), size)
        if byte_range is False:
            response = HttpResponse(status=416, content_type=content_type)
            response["Content-Range"] = f"bytes */{size}"
        elif byte_range is None:
            response = StreamingHttpResponse(gateway.iter_chunks(key), content_type=content_type)
            response["Content-Length"] = str(size)
        else:
            start, end = byte_range
            response = StreamingHttpResponse(
                gateway.iter_chunks(key, start=start, end=end), status=206, content_type=content_type
            )
            response["Content-Range"] = f"bytes {start}-{end}/{size}"
            response["Content-Length"] = str(end - start + 1)
    response["Accept-Ranges"] = "bytes"
    response["Content-Disposition"] = disposition
    return _security_headers(response)
