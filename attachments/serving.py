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


# Content type -> the extensions that name it, the first the one a renamed download takes.
# Only the types a served file may have where it is not the upload as it came: a HEIC/HEIF/AVIF's
# display rendition, and the stream copy of a video or audio file (processing/steps/media.py).
_EXTENSIONS: dict[str, tuple[str, ...]] = {
    "image/jpeg": ("jpg", "jpeg", "jpe"),
    "image/webp": ("webp",),
    "image/heic": ("heic",),
    "image/heif": ("heif", "hif"),
    "image/avif": ("avif",),
    "video/mp4": ("mp4", "m4v"),
    "video/quicktime": ("mov", "qt"),
    "video/webm": ("webm",),
    "video/x-matroska": ("mkv",),
    "audio/mp4": ("m4a", "m4b", "mp4"),
    "audio/mpeg": ("mp3",),
    "audio/ogg": ("ogg", "oga", "opus"),
    "audio/x-wav": ("wav",),
}
_KNOWN = frozenset(ext for exts in _EXTENSIONS.values() for ext in exts)


def download_name(filename: str, content_type: str | None) -> str:
    """The name the served file is handed out under: the upload's, its extension changed when it names
    another type than the one served (`IMG_0001.HEIC` served as JPEG is `IMG_0001.jpg`; `clip.mp4`
    whose copy is a MOV is `clip.mov`) so a player or OS going by the name opens it as what it is.
    A name without an extension, or with one not in the table, is left as it is."""
    stem, dot, ext = filename.rpartition(".")
    served = _EXTENSIONS.get(content_type or "")
    if dot and stem and served and ext.lower() in _KNOWN and ext.lower() not in served:
        return f"{stem}.{served[0]}"
    return filename


def security_headers(response: _Response) -> _Response:
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
    """The key and size of what a download serves, or None until processing recorded the checked copy.

    Never the upload as it came: what was not described by processing was not checked either.
    """
    if attachment.served_key and attachment.size is not None:
        return attachment.served_key, attachment.size
    return None


def file_response(request, *, key: str, size: int, content_type: str, filename: str, inline: bool) -> HttpResponseBase:
    disposition = content_disposition("inline" if inline else "attachment", filename)
    content_type = content_type or "application/octet-stream"
    gateway = get_gateway()
    url = gateway.presign_download(
        key, content_type=content_type, disposition=disposition, expires_in=settings.AIRLOCK_URL_SECONDS.download
    )
    if url is not None:
        return security_headers(HttpResponseRedirect(url))
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
    return security_headers(response)


def derivative_response(request, derivative, *, filename: str) -> HttpResponseBase:
    """A stored rendition (thumbnail, poster, display, variant, page) shown inline, as file_response serves."""
    return file_response(
        request,
        key=derivative.storage_key,
        size=derivative.size,
        content_type=derivative.content_type,
        filename=filename,
        inline=True,
    )


def stem(filename: str, default: str) -> str:
    """The uploaded name without its extension, for naming a rendition of it."""
    return filename.rsplit(".", 1)[0] or default


def served_response(request, attachment, served: tuple[str, int], *, inline: bool) -> HttpResponseBase:
    """The file as served (served_object's key and size), named for the served copy's type."""
    key, size = served
    return file_response(
        request,
        key=key,
        size=size,
        content_type=attachment.content_type,
        filename=download_name(attachment.filename, attachment.content_type),
        inline=inline,
    )
