"""tus 1.0.0 over HTTP (core, creation, creation-with-upload, termination, expiration, checksum).

Parse the protocol's headers, call one service, answer with the protocol's
headers. The bodies of errors are the contract's JSON error shape; tus clients
read only the status. Not in the OpenAPI document: tus is a header protocol
with raw bodies (docs/api.md, "Resumable uploads (tus)").
"""

from __future__ import annotations

import base64
import binascii
import re

from django.urls import reverse
from django.utils.http import http_date
from drf_spectacular.utils import extend_schema
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from ..client_tokens.scope import ClientTokenScope
from ..errors import AirlockError, TooLarge, ValidationFailed
from ..models import TusUpload
from ..services.tus import (
    CHECKSUMS,
    tus_max_size,
    tus_upload_append,
    tus_upload_create,
    tus_upload_recover,
    tus_upload_terminate,
)
from .links import absolute_url

TUS_VERSION = "1.0.0"
EXTENSIONS = "creation,creation-with-upload,termination,expiration,checksum"
OFFSET_TYPE = "application/offset+octet-stream"
_INT = re.compile(r"^[0-9]{1,18}$")


class TusVersionUnsupported(AirlockError):
    code, status, default_message = "TUS_VERSION_UNSUPPORTED", 412, "Tus-Resumable must be 1.0.0."


class UnsupportedMediaType(AirlockError):
    code, status, default_message = (
        "UNSUPPORTED_MEDIA_TYPE",
        415,
        "A PATCH body must be sent as application/offset+octet-stream.",
    )


def _header_int(request, name: str, *, required: bool = True) -> int | None:
    raw = request.headers.get(name)
    if raw is None or raw == "":
        if required:
            raise ValidationFailed(f"{name} is required.", details={name: ["This header is required."]})
        return None
    if not _INT.match(raw.strip()):
        raise ValidationFailed(f"{name} must be a non-negative integer.", details={name: ["A non-negative integer."]})
    return int(raw.strip())


def parse_metadata(raw: str | None) -> dict[str, str]:
    """Upload-Metadata: comma-separated `key base64value` pairs (a key may come without a value)."""
    found: dict[str, str] = {}
    for item in (raw or "").split(","):
        item = item.strip()
        if not item:
            continue
        key, _, value = item.partition(" ")
        try:
            found[key] = base64.b64decode(value.strip(), validate=True).decode("utf-8") if value.strip() else ""
        except (binascii.Error, UnicodeDecodeError):
            raise ValidationFailed(
                "Upload-Metadata values must be base64 (UTF-8).",
                details={"Upload-Metadata": [f"{key[:50]}: not base64 of UTF-8 text."]},
            ) from None
    return found


def parse_checksum(raw: str | None) -> tuple[str, bytes] | None:
    """Upload-Checksum: `<algorithm> <base64 digest>`; an algorithm we do not offer is a 400 (the spec's)."""
    if raw is None:
        return None
    algorithm, _, digest = raw.strip().partition(" ")
    algorithm = algorithm.lower()
    if algorithm not in CHECKSUMS:
        raise ValidationFailed(
            "Unsupported checksum algorithm.", details={"Upload-Checksum": [f"One of: {', '.join(CHECKSUMS)}."]}
        )
    try:
        return algorithm, base64.b64decode(digest.strip(), validate=True)
    except binascii.Error:
        raise ValidationFailed(
            "Upload-Checksum's digest must be base64.", details={"Upload-Checksum": ["Base64 digest."]}
        ) from None


def _body(request):
    django_request = request._request
    return iter(lambda: django_request.read(256 * 1024), b"")


def _metadata(upload: TusUpload) -> str:
    """Upload-Metadata for HEAD (the spec's MUST): what was kept of the client's metadata."""
    attachment = upload.attachment
    kept = {"profile": attachment.profile, "filename": attachment.filename, "content_type": attachment.declared_type}
    return ",".join(f"{key} {base64.b64encode(value.encode()).decode()}" for key, value in kept.items())


def _media_type(request) -> str:
    return (request.content_type or "").split(";", 1)[0].strip().lower()


def _expires(upload: TusUpload) -> dict[str, str]:
    if upload.state != TusUpload.State.ACTIVE:
        return {}
    return {"Upload-Expires": http_date(upload.expires_at.timestamp())}


@extend_schema(exclude=True)
class TusApi(APIView):
    """Shared by the creation URL and each upload's URL: version check, OPTIONS, the headers on every answer."""

    parser_classes: list = []  # raw bodies, read by the views themselves
    client_token_allowed = True
    streams_body = True  # ops/body_first.py leaves the body to the view

    def dispatch(self, request, *args, **kwargs):
        # Clients behind proxies that only pass GET/POST send the real method here (tus-js-client's
        # overridePatchMethod, the spec's X-HTTP-Method-Override).
        override = request.headers.get("X-HTTP-Method-Override", "").upper()
        if request.method == "POST" and override in ("PATCH", "DELETE", "HEAD"):
            request.method = override
        return super().dispatch(request, *args, **kwargs)

    def get_permissions(self):
        if self.request.method == "OPTIONS":
            return [AllowAny()]
        return [IsAuthenticated(), ClientTokenScope()]

    def initial(self, request, *args, **kwargs):
        if request.method != "OPTIONS" and request.headers.get("Tus-Resumable") != TUS_VERSION:
            raise TusVersionUnsupported(headers={"Tus-Version": TUS_VERSION})
        super().initial(request, *args, **kwargs)

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        response["Tus-Resumable"] = TUS_VERSION
        return response

    def options(self, request, *args, **kwargs):
        return Response(
            status=204,
            headers={
                "Tus-Version": TUS_VERSION,
                "Tus-Max-Size": str(tus_max_size()),
                "Tus-Extension": EXTENSIONS,
                "Tus-Checksum-Algorithm": ",".join(CHECKSUMS),
            },
        )


class TusCreateApi(TusApi):
    """POST /api/v1/tus/: a new upload (an intent), optionally with its first bytes."""

    def post(self, request):
        if request.headers.get("Upload-Defer-Length") is not None:
            raise ValidationFailed(
                "Deferred length is not offered: send Upload-Length.",
                details={"Upload-Defer-Length": ["Not supported."]},
            )
        length = _header_int(request, "Upload-Length")
        max_size = tus_max_size()
        metadata = parse_metadata(request.headers.get("Upload-Metadata"))
        profile = metadata.get("profile")
        filename = metadata.get("filename") or metadata.get("name") or "file"
        content_type = metadata.get("content_type") or metadata.get("filetype") or metadata.get("type") or ""
        content_type = content_type.split(";", 1)[0].strip().lower()
        if not profile:  # the type may be left out, as a browser leaves it empty: the bytes decide
            raise ValidationFailed(
                "Upload-Metadata must name the profile.", details={"profile": ["Required in Upload-Metadata."]}
            )
        if length > max_size:
            raise TooLarge(
                f"Upload-Length is over the largest limit of {max_size} bytes.", details={"max_bytes": max_size}
            )
        upload = tus_upload_create(
            user=request.user,
            length=length,
            profile_name=profile,
            filename=filename[:1024],
            content_type=content_type[:255],
        )
        location = absolute_url(request, reverse("tus-upload", kwargs={"attachment_id": upload.pk}))
        headers = {"Location": location}
        content_length = _header_int(request, "Content-Length", required=False) or 0
        if _media_type(request) == OFFSET_TYPE and content_length:
            try:
                upload = tus_upload_append(
                    user=request.user,
                    attachment_id=upload.pk,
                    offset=0,
                    chunks=_body(request),
                    content_length=content_length,
                    checksum=parse_checksum(request.headers.get("Upload-Checksum")),
                )
            except AirlockError as exc:
                exc.headers.update(headers)  # the upload exists: the client may resume it
                raise
            headers["Upload-Offset"] = str(upload.offset)
        return Response(status=201, headers={**headers, **_expires(upload)})


class TusUploadApi(TusApi):
    """HEAD/PATCH/DELETE /api/v1/tus/{attachment_id}: the owner's upload (anyone else: 404)."""

    def head(self, request, attachment_id):
        upload = tus_upload_recover(user=request.user, attachment_id=attachment_id)
        return Response(
            status=200,
            headers={
                "Upload-Offset": str(upload.offset),
                "Upload-Length": str(upload.length),
                "Cache-Control": "no-store",
                "Upload-Metadata": _metadata(upload),
                **_expires(upload),
            },
        )

    def patch(self, request, attachment_id):
        if _media_type(request) != OFFSET_TYPE:
            raise UnsupportedMediaType()
        offset = _header_int(request, "Upload-Offset")
        content_length = _header_int(request, "Content-Length", required=False)
        if content_length is None:
            # Django cannot read a chunked body: without a length the bytes would be lost.
            raise ValidationFailed(
                "Content-Length is required (chunked bodies are not supported).",
                details={"Content-Length": ["This header is required."]},
            )
        checksum = parse_checksum(request.headers.get("Upload-Checksum"))
        upload = tus_upload_append(
            user=request.user,
            attachment_id=attachment_id,
            offset=offset,
            chunks=_body(request),
            content_length=content_length,
            checksum=checksum,
        )
        return Response(status=204, headers={"Upload-Offset": str(upload.offset), **_expires(upload)})

    def delete(self, request, attachment_id):
        tus_upload_terminate(user=request.user, attachment_id=attachment_id)
        return Response(status=204)
