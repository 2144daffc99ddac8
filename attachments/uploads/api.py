"""Uploading over HTTP: the intent, the local backend's signed PUT, the completion hint, re-signed multipart
parts, and tus 1.0.0 (core, creation, creation-with-upload, termination, expiration, checksum).

The tus views parse the protocol's headers, call one service, answer with the protocol's headers. The bodies
of their errors are the contract's JSON error shape; tus clients read only the status. tus is not in the
OpenAPI document: it is a header protocol with raw bodies (docs/api.md, "Resumable uploads (tus)").
"""

from __future__ import annotations

import base64
import binascii
import re
import uuid

from django.http import JsonResponse
from django.urls import reverse
from django.utils.decorators import method_decorator
from django.utils.http import http_date
from django.views import View
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from ..api.errors import json_error
from ..api.http import content_length
from ..api.links import absolute_url
from ..api.schema import ATTACHMENT_ID, JSON_TOO_LARGE, errors
from ..api.serializers import (
    AttachmentOutputSerializer,
    SharedSerializer,
    StrictCharField,
    StrictIntegerField,
    UtcDateTimeField,
    attachment_resource,
)
from ..api.views import resource_for
from ..client_tokens.scope import ClientTokenScope
from ..errors import (
    AirlockError,
    NotAuthenticated,
    NotFound,
    OutOfScope,
    QuotaExceeded,
    RateLimited,
    TooLarge,
    TypeNotAllowed,
    UnknownProfile,
    ValidationFailed,
)
from ..models import Status, TusUpload
from ..selectors import attachment_owned
from .services.intents import upload_intent_create
from .services.multipart import UploadNotInProgress, upload_parts_resign
from .services.tus import (
    CHECKSUMS,
    tus_max_size,
    tus_upload_append,
    tus_upload_create,
    tus_upload_recover,
    tus_upload_terminate,
)
from .services.uploads import upload_complete, upload_content_receive

_TAGS = ["uploads"]


@extend_schema_serializer(component_name="UploadPart")
class UploadPartOutputSerializer(SharedSerializer):
    part_number = serializers.IntegerField(min_value=1)
    url = serializers.URLField()


def _complete_url(request, attachment_id) -> str:
    return absolute_url(request, reverse("upload-complete", kwargs={"attachment_id": str(attachment_id)}))


@extend_schema_serializer(component_name="UploadInstruction")
class UploadInstructionSerializer(SharedSerializer):
    method = serializers.ChoiceField(choices=["PUT", "POST"])
    url = serializers.URLField()
    headers = serializers.DictField(
        child=serializers.CharField(allow_blank=True), help_text="Send exactly these headers (PUT)."
    )
    # DRF's metaclass takes declared fields out of the class: this does not shadow Serializer.fields.
    fields = serializers.DictField(  # type: ignore[assignment]
        child=serializers.CharField(allow_blank=True), help_text="Form fields before `file` (POST)."
    )
    expires_at = UtcDateTimeField()
    part_size = serializers.IntegerField(required=False, help_text="S3 multipart only.")
    parts = UploadPartOutputSerializer(many=True, required=False, help_text="S3 multipart only: PUT each part.")
    complete_url = serializers.URLField(required=False, help_text="S3 multipart only: POST the parts' ETags.")


class UploadIntentApi(APIView):
    client_token_allowed = True

    @extend_schema_serializer(component_name="UploadIntent")
    class InputSerializer(SharedSerializer):
        profile = StrictCharField(max_length=64)
        filename = StrictCharField(max_length=1024, trim_whitespace=False)
        size = StrictIntegerField(min_value=0, max_value=2**62)
        content_type = StrictCharField(
            max_length=255,
            allow_blank=True,
            default="",
            help_text="What the sender believes the type is; empty or `application/octet-stream` when it does not "
            "know. Recorded as `declared_type`; the bytes decide (a type the profile does not allow, found in them, "
            "ends `rejected` with `type_not_allowed`). Refused here (`TYPE_NOT_ALLOWED`) only when it is specific, "
            "not allowed, and the file name's extension names no allowed type either.",
        )
        sha256 = StrictCharField(
            required=False,
            max_length=64,
            help_text="Optional SHA-256 of the bytes, 64 hex digits or base64. S3: send it as "
            "`x-amz-checksum-sha256` (in `upload.headers`/`upload.fields`). Other bytes end "
            "`rejected` with `checksum_mismatch`, or are refused while they stream.",
        )

    @extend_schema_serializer(component_name="IntentResponse")
    class OutputSerializer(SharedSerializer):
        id = serializers.UUIDField(source="attachment.pk")
        status = serializers.ChoiceField(choices=[Status.PENDING], source="attachment.status")
        subject = serializers.CharField(source="attachment.subject", help_text="Whom the file is for.")
        profile = serializers.CharField(source="attachment.profile")
        expires_at = UtcDateTimeField(source="attachment.expires_at")
        upload = UploadInstructionSerializer()

    @extend_schema(
        operation_id="uploads_create",
        tags=_TAGS,
        summary="Create an upload intent",
        description="Validates the declared size and type against the profile (an empty or generic type is no "
        "refusal: the bytes decide), creates the pending attachment and "
        "returns where to send the bytes (PUT with `headers`, or multipart POST with `fields` then `file`). "
        "The URL is single-use and expires.",
        request=InputSerializer,
        responses={
            201: OpenApiResponse(OutputSerializer, description="The pending attachment and where to send its bytes."),
            **errors(
                ValidationFailed,
                UnknownProfile,
                TypeNotAllowed,
                NotAuthenticated,
                OutOfScope,
                TooLarge,
                QuotaExceeded,
                RateLimited,
                TOO_LARGE="the declared size is over the profile's limit, or the body over 2 MiB",
                RATE_LIMITED="too many intents per minute or too many pending uploads (`Retry-After` is set)",
            ),
        },
    )
    def post(self, request):
        data = self.InputSerializer.validate_body(request.data)
        # Media types are case-insensitive and may carry parameters ("image/jpeg; q=1").
        content_type = data["content_type"].split(";", 1)[0].strip().lower()
        intent = upload_intent_create(
            user=request.user,
            profile_name=data["profile"],
            filename=data["filename"],
            size=data["size"],
            content_type=content_type,
            sha256=data.get("sha256"),
        )
        attachment = intent.attachment
        upload = {
            "method": intent.upload.method,
            "url": absolute_url(request, intent.upload.url),
            "headers": intent.upload.headers,
            "fields": intent.upload.fields,
            "expires_at": intent.upload_expires_at,
        }
        if intent.upload.parts:  # S3 multipart: PUT each part, then POST complete_url with the ETags
            upload.update(
                part_size=intent.upload.part_size,
                parts=intent.upload.parts,
                complete_url=_complete_url(request, attachment.pk),
            )
        return Response(self.OutputSerializer.render({"attachment": attachment, "upload": upload}), status=201)


@method_decorator(csrf_exempt, name="dispatch")
class UploadContentView(View):
    """PUT /uploads/{id}/content?token=…: the token is the only credential (attachments/api/schema.py documents it)."""

    http_method_names = ["put"]
    streams_body = True  # ops/body_first.py leaves the body to the view

    def put(self, request, attachment_id: uuid.UUID):
        try:
            length = content_length(request)
            if length is None:
                # Django's WSGI request cannot read a chunked body: without a length the
                # bytes would be lost and the URL used up by an empty upload.
                raise ValidationFailed(
                    "Content-Length is required (chunked uploads are not supported).",
                    details={"Content-Length": ["This header is required."]},
                )
            attachment = upload_content_receive(
                attachment_id=attachment_id,
                token=request.GET.get("token"),
                chunks=lambda: iter(lambda: request.read(64 * 1024), b""),
                content_length=length,
            )
        except AirlockError as exc:
            return json_error(exc)
        return JsonResponse(attachment_resource(attachment, request, can_read=False), status=202)


@extend_schema_serializer(component_name="UploadCompletePart")
class UploadCompletePartSerializer(SharedSerializer):
    part_number = StrictIntegerField(min_value=1, max_value=10_000)
    etag = StrictCharField(max_length=128)


class UploadCompleteApi(APIView):
    """The client's "bytes are in place" hint; for S3 multipart intents it also assembles the parts."""

    client_token_allowed = True

    @extend_schema_serializer(component_name="UploadComplete")
    class InputSerializer(SharedSerializer):
        parts: serializers.ListSerializer = serializers.ListSerializer(
            child=UploadCompletePartSerializer(),
            min_length=1,
            max_length=10_000,
            required=False,
            help_text="S3 multipart intents only; omit for the plain hint.",
        )

        def validate_parts(self, parts):
            if len({part["part_number"] for part in parts}) != len(parts):
                raise serializers.ValidationError("Each part_number may appear once.")
            return parts

    @extend_schema(
        operation_id="uploads_complete",
        tags=_TAGS,
        summary="Tell the server the bytes are in place",
        description="Optional hint for storage without event notifications; the server checks storage itself. "
        "Idempotent. For S3 multipart intents, send the parts' ETags.",
        parameters=[ATTACHMENT_ID],
        request=InputSerializer,
        responses={
            202: OpenApiResponse(AttachmentOutputSerializer, description="The attachment resource."),
            **errors(ValidationFailed, NotAuthenticated, NotFound, TooLarge, TOO_LARGE=JSON_TOO_LARGE),
        },
    )
    def post(self, request, attachment_id):
        attachment = attachment_owned(user=request.user, attachment_id=attachment_id)
        parts = None
        # An empty body, or one without "parts", is the plain hint (unchanged behaviour).
        if isinstance(request.data, dict) and "parts" in request.data:
            try:
                data = self.InputSerializer.validate_body(request.data)
            except serializers.ValidationError as exc:
                raise ValidationFailed(details=_part_errors(exc.detail)) from None
            parts = [(part["part_number"], part["etag"]) for part in data["parts"]]
        attachment = upload_complete(attachment=attachment, parts=parts)
        return Response(resource_for(request, attachment), status=202)


def _part_errors(detail) -> dict[str, list[str]]:
    """Per-part messages keyed `parts[i].field`, the rest as they come."""
    flat: dict[str, list[str]] = {}
    for name, value in detail.items():
        if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            for index, item in enumerate(value):
                for field, messages in item.items():
                    flat[f"{name}[{index}].{field}"] = [str(m) for m in messages]
        elif isinstance(value, dict):
            flat[name] = [str(m) for messages in value.values() for m in messages]
        else:
            flat[name] = [str(m) for m in value]
    return flat


@extend_schema_serializer(component_name="UploadedPart")
class UploadedPartSerializer(SharedSerializer):
    part_number = serializers.IntegerField(min_value=1)
    etag = serializers.CharField()
    size = serializers.IntegerField()


class UploadPartsApi(APIView):
    """Fresh URLs for the parts of an in-progress multipart upload that are not in storage yet."""

    client_token_allowed = True

    @extend_schema_serializer(component_name="PartsResponse")
    class OutputSerializer(SharedSerializer):
        id = serializers.UUIDField()
        part_size = serializers.IntegerField()
        expires_at = UtcDateTimeField(help_text="When the new part URLs expire.")
        parts = UploadPartOutputSerializer(many=True, help_text="The parts still to upload, freshly signed.")
        uploaded_parts = UploadedPartSerializer(many=True, help_text="Parts already in storage (keep their ETags).")
        complete_url = serializers.URLField()

    @extend_schema(
        operation_id="uploads_parts_resign",
        tags=_TAGS,
        summary="Re-sign the remaining part URLs of a multipart upload",
        description="For the caller's in-progress S3 multipart intent: fresh presigned URLs for every part not yet "
        "in storage, and the parts already uploaded (with their ETags), so an upload whose part URLs expired "
        "can resume. No body.",
        parameters=[ATTACHMENT_ID],
        request=None,
        responses={
            200: OpenApiResponse(OutputSerializer, description="The remaining parts, re-signed."),
            **errors(NotAuthenticated, NotFound, UploadNotInProgress),
        },
    )
    def post(self, request, attachment_id):
        plan = upload_parts_resign(user=request.user, attachment_id=attachment_id)
        return Response(
            self.OutputSerializer.render(
                {
                    "id": attachment_id,
                    "part_size": plan.part_size,
                    "expires_at": plan.expires_at,
                    "parts": plan.parts,
                    "uploaded_parts": [
                        {"part_number": n, "etag": etag, "size": size}
                        for n, (etag, size) in sorted(plan.uploaded.items())
                    ],
                    "complete_url": _complete_url(request, attachment_id),
                }
            )
        )


# tus 1.0.0

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
