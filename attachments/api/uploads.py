"""Uploading: the intent, the local backend's signed PUT, the completion hint, re-signed multipart parts."""

from __future__ import annotations

import uuid

from django.http import JsonResponse
from django.urls import reverse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

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
from ..models import Status
from ..selectors import attachment_owned
from ..services.intents import upload_intent_create
from ..services.multipart import UploadNotInProgress, upload_parts_resign
from ..services.uploads import upload_complete, upload_content_receive
from .errors import json_error
from .http import content_length
from .links import absolute_url
from .schema import ATTACHMENT_ID, JSON_TOO_LARGE, errors
from .serializers import (
    AttachmentOutputSerializer,
    SharedSerializer,
    StrictCharField,
    StrictIntegerField,
    UtcDateTimeField,
    attachment_resource,
)
from .views import resource_for

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
    """PUT /uploads/{id}/content?token=…: the token is the only credential (documented in schema.py)."""

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
