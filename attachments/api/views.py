"""HTTP edge: parse and validate, call one service or selector, shape the response."""

from __future__ import annotations

import base64
import binascii
import uuid
from datetime import datetime

from django.http import HttpRequest
from django.urls import reverse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import extend_schema_view
from rest_framework import serializers
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from .. import waiting
from ..errors import AirlockError, NotFound, TooLarge, ValidationFailed
from ..models import TERMINAL_STATUSES, Attachment, Status
from ..profiles import all_profiles
from ..selectors import (
    attachment_for_download,
    attachment_owned,
    attachment_visible,
    attachments_of_owner,
    can_read_file,
    thumbnail_dims,
    thumbnail_of,
)
from ..serving import file_response, served_object
from ..services.intents import upload_intent_create
from ..services.multipart import upload_parts_resign
from ..services.lifecycle import (
    attachment_discard,
    attachments_commit,
    attachments_discard_all,
    attachments_heartbeat,
)
from ..services.uploads import upload_complete, upload_content_receive, upload_through
from . import schema
from .errors import json_error
from .links import absolute_url
from .serializers import (
    CommitRequest,
    IdsRequest,
    IntentRequest,
    StrictCharField,
    StrictIntegerField,
    _iso,
    attachment_resource,
    plain_validated_data,
)


def _valid(serializer_class, request) -> dict:
    if not isinstance(request.data, dict):
        raise ValidationFailed("The body must be a JSON object.", details={"non_field_errors": ["Expected an object."]})
    plain = plain_validated_data(serializer_class, request.data)
    if plain is not None:
        return plain
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def _resource(request, attachment: Attachment) -> dict:
    thumbnail = thumbnail_dims(attachment)
    readable = can_read_file(user=request.user, attachment=attachment)
    return attachment_resource(attachment, request, can_read=readable, thumbnail=thumbnail if readable else None)


@extend_schema_view(**schema.PROFILES)
class ProfilesApi(APIView):
    def get(self, request):
        return Response({
            "profiles": [
                {"name": p.name, "allowed_types": list(p.allowed_types), "max_bytes": p.max_bytes,
                 "derivatives": list(p.derivatives), "single_per_owner": p.single_per_owner}
                for p in all_profiles().values()
            ]
        })


@extend_schema_view(**schema.UPLOAD_INTENT)
class UploadIntentApi(APIView):
    def post(self, request):
        data = _valid(IntentRequest, request)
        # Media types are case-insensitive and may carry parameters ("image/jpeg; q=1").
        content_type = data["content_type"].split(";", 1)[0].strip().lower()
        intent = upload_intent_create(user=request.user, profile_name=data["profile"], filename=data["filename"],
                                      size=data["size"], content_type=content_type)
        url = absolute_url(request, intent.upload.url)
        attachment = intent.attachment
        upload = {
            "method": intent.upload.method,
            "url": url,
            "headers": intent.upload.headers,
            "fields": intent.upload.fields,
            "expires_at": _iso(intent.upload_expires_at),
        }
        if intent.upload.parts:  # S3 multipart: PUT each part, then POST complete_url with the ETags
            upload["part_size"] = intent.upload.part_size
            upload["parts"] = [{"part_number": p.part_number, "url": p.url} for p in intent.upload.parts]
            upload["complete_url"] = absolute_url(
                request, reverse("upload-complete", kwargs={"attachment_id": str(attachment.pk)}))
        return Response(
            {
                "id": str(attachment.pk),
                "status": attachment.status,
                "profile": attachment.profile,
                "expires_at": _iso(attachment.expires_at),
                "upload": upload,
            },
            status=201,
        )


def _content_length(request: HttpRequest) -> int | None:
    """The declared body length; None when absent. A negative or non-numeric one is a 400."""
    raw = request.META.get("CONTENT_LENGTH")
    if raw in (None, ""):
        return None
    if not (raw.isascii() and raw.isdigit()):
        raise ValidationFailed("Content-Length must be a non-negative integer.",
                               details={"Content-Length": ["A non-negative integer."]})
    return int(raw) if len(raw) <= 18 else 10**18  # larger than any limit; int() refuses > 4300 digits


@method_decorator(csrf_exempt, name="dispatch")
class UploadContentView(View):
    """PUT /uploads/{id}/content?token=…: the token is the only credential."""

    http_method_names = ["put"]

    def put(self, request, attachment_id: uuid.UUID):
        try:
            length = _content_length(request)
            if length is None:
                # Django's WSGI request cannot read a chunked body: without a length the
                # bytes would be lost and the URL used up by an empty upload.
                raise ValidationFailed("Content-Length is required (chunked uploads are not supported).",
                                       details={"Content-Length": ["This header is required."]})
            attachment = upload_content_receive(
                attachment_id=attachment_id,
                token=request.GET.get("token"),
                chunks=lambda: iter(lambda: request.read(64 * 1024), b""),
                content_length=length,
            )
        except AirlockError as exc:
            return json_error(exc)
        from django.http import JsonResponse

        body = attachment_resource(attachment, request, can_read=False)
        return JsonResponse(body, status=202)


@extend_schema_view(**schema.UPLOAD_COMPLETE)
class UploadCompleteApi(APIView):
    """The client's "bytes are in place" hint; for S3 multipart intents it also assembles the parts."""

    class PartRequest(serializers.Serializer):
        part_number = StrictIntegerField(min_value=1, max_value=10_000)
        etag = StrictCharField(max_length=128)

    class CompleteRequest(serializers.Serializer):
        parts = serializers.ListField(child=serializers.DictField(), min_length=1, max_length=10_000)

    def post(self, request, attachment_id):
        attachment = attachment_owned(user=request.user, attachment_id=attachment_id)
        parts = None
        # An empty body, or one without "parts", is the plain hint (unchanged behaviour).
        if isinstance(request.data, dict) and "parts" in request.data:
            data = _valid(self.CompleteRequest, request)
            parts = []
            for index, raw in enumerate(data["parts"]):
                part = self.PartRequest(data=raw)
                if not part.is_valid():
                    raise ValidationFailed(details={f"parts[{index}].{name}": [str(m) for m in messages]
                                                    for name, messages in part.errors.items()})
                parts.append((part.validated_data["part_number"], part.validated_data["etag"]))
            if len({number for number, _ in parts}) != len(parts):
                raise ValidationFailed(details={"parts": ["Each part_number may appear once."]})
        attachment = upload_complete(attachment=attachment, parts=parts)
        return Response(_resource(request, attachment), status=202)


@extend_schema_view(**schema.UPLOAD_PARTS)
class UploadPartsApi(APIView):
    """Fresh URLs for the parts of an in-progress multipart upload that are not in storage yet."""

    def post(self, request, attachment_id):
        plan = upload_parts_resign(user=request.user, attachment_id=attachment_id)
        return Response({
            "id": str(attachment_id),
            "part_size": plan.part_size,
            "expires_at": _iso(plan.expires_at),
            "parts": [{"part_number": p.part_number, "url": p.url} for p in plan.parts],
            "uploaded_parts": [{"part_number": n, "etag": etag, "size": size}
                               for n, (etag, size) in sorted(plan.uploaded.items())],
            "complete_url": absolute_url(request, reverse("upload-complete",
                                                          kwargs={"attachment_id": str(attachment_id)})),
        })


def _encode_cursor(attachment: Attachment) -> str:
    raw = f"{attachment.created_at.isoformat()}|{attachment.pk}"
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_cursor(value: str) -> tuple[datetime, uuid.UUID]:
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).decode()
        created, pk = raw.split("|", 1)
        return datetime.fromisoformat(created), uuid.UUID(pk)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise ValidationFailed("Invalid cursor.", details={"cursor": ["Invalid cursor."]}) from None


@extend_schema_view(**schema.ATTACHMENT_LIST)
class AttachmentListApi(APIView):
    parser_classes = [MultiPartParser, FormParser]

    def get(self, request):
        params = request.query_params
        committed = params.get("committed")
        if committed not in (None, "true", "false"):
            raise ValidationFailed(details={"committed": ["Use true or false."]})
        try:
            limit = min(100, max(1, int(params.get("limit", 50))))
        except ValueError:
            raise ValidationFailed(details={"limit": ["An integer."]}) from None
        status = params.get("status") or None
        if status is not None and status not in Status.values:
            raise ValidationFailed(details={"status": [f"One of: {', '.join(Status.values)}."]})
        profile = params.get("profile") or None
        if profile is not None and profile not in all_profiles():
            raise ValidationFailed(details={"profile": ["Unknown profile."]})
        cursor = params.get("cursor")
        qs = attachments_of_owner(user=request.user, status=status, profile=profile,
                                  committed=None if committed is None else committed == "true",
                                  before=_decode_cursor(cursor) if cursor else None)
        page = list(qs.prefetch_related("derivatives")[: limit + 1])
        has_more = len(page) > limit
        page = page[:limit]
        next_url = None
        if has_more:
            query = params.copy()
            query["cursor"] = _encode_cursor(page[-1])
            next_url = absolute_url(request, f"{request.path}?{query.urlencode()}")
        results = []
        for attachment in page:
            thumbs = [d for d in attachment.derivatives.all() if d.kind == "thumbnail"]
            thumbnail = ({"width": thumbs[0].width, "height": thumbs[0].height}
                         if thumbs and attachment.status == "ready" else None)
            readable = can_read_file(user=request.user, attachment=attachment)
            results.append(attachment_resource(attachment, request, can_read=readable,
                                               thumbnail=thumbnail if readable else None))
        return Response({"results": results, "next": next_url})

    def post(self, request):
        from django.conf import settings

        # Refuse before the multipart parser spools anything: the form overhead is small.
        cap = settings.AIRLOCK_UPLOAD_THROUGH_MAX_BYTES + 64 * 1024
        length = _content_length(request._request)
        if length is not None and length > cap:
            raise TooLarge(f"The body is larger than the {settings.AIRLOCK_UPLOAD_THROUGH_MAX_BYTES} bytes allowed.",
                           details={"max_bytes": settings.AIRLOCK_UPLOAD_THROUGH_MAX_BYTES})
        upload = request.FILES.get("file")
        if upload is None or "profile" not in request.data:
            raise ValidationFailed(details={
                **({"file": ["This field is required."]} if upload is None else {}),
                **({"profile": ["This field is required."]} if "profile" not in request.data else {}),
            })
        filename = request.data.get("filename") or upload.name or "file"
        attachment = upload_through(
            user=request.user, profile_name=request.data.get("profile"), filename=str(filename),
            chunks=upload.chunks(64 * 1024), size_hint=upload.size or 0,
            declared_type=(upload.content_type or "")[:127],
        )
        return Response(_resource(request, attachment), status=202)


@extend_schema_view(**schema.ATTACHMENT_DETAIL)
class AttachmentDetailApi(APIView):
    def get(self, request, attachment_id):
        def read():
            return attachment_visible(user=request.user, attachment_id=attachment_id)

        seconds = _wait_seconds(request.query_params.get("wait"), read)
        if seconds:
            # Sleeps until a transition of this attachment is announced (no polling); its
            # first read, made once it listens, is also the visibility check.
            attachment = waiting.wait_until(user_id=request.user.pk, attachment_id=str(attachment_id),
                                            seconds=seconds, read=read,
                                            settled=lambda a: a.status in TERMINAL_STATUSES)
        else:
            attachment = read()
        return Response(_resource(request, attachment))


def _wait_seconds(wait: str | None, read) -> float:
    if wait is None:
        return 0.0
    try:
        seconds = float(wait)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 30:  # NaN fails this too
        read()  # an unknown attachment is a 404 before a bad parameter is a 400
        raise ValidationFailed(details={"wait": ["A number of seconds, at most 30."]})
    return seconds


@extend_schema_view(**schema.ATTACHMENT_DOWNLOAD)
class AttachmentDownloadApi(APIView):
    def get(self, request, attachment_id):
        attachment = attachment_for_download(user=request.user, attachment_id=attachment_id)
        served = served_object(attachment)
        if served is None:
            raise NotFound()
        key, size = served
        return file_response(request, key=key, size=size, content_type=attachment.content_type,
                             filename=attachment.filename, inline=False)


@extend_schema_view(**schema.ATTACHMENT_THUMBNAIL)
class AttachmentThumbnailApi(APIView):
    def get(self, request, attachment_id):
        attachment = attachment_for_download(user=request.user, attachment_id=attachment_id)
        thumbnail = thumbnail_of(attachment)
        if thumbnail is None:
            raise NotFound()
        stem = attachment.filename.rsplit(".", 1)[0] or "thumbnail"
        return file_response(request, key=thumbnail.storage_key, size=thumbnail.size,
                             content_type=thumbnail.content_type, filename=f"{stem}.webp", inline=True)


@extend_schema_view(**schema.HEARTBEAT)
class HeartbeatApi(APIView):
    def post(self, request):
        data = _valid(IdsRequest, request)
        result = attachments_heartbeat(user=request.user, ids=data["ids"])
        return Response({
            "attachments": [{"id": pk, "expires_at": _iso(exp)} for pk, exp in result.attachments],
            "missing": result.missing,
        })


@extend_schema_view(**schema.DISCARD)
class DiscardApi(APIView):
    def post(self, request, attachment_id):
        attachment_discard(user=request.user, attachment_id=attachment_id)
        return Response(status=204)


@extend_schema_view(**schema.DISCARD_ALL)
class DiscardAllApi(APIView):
    def post(self, request):
        return Response({"discarded": attachments_discard_all(user=request.user)})


@extend_schema_view(**schema.COMMIT)
class CommitApi(APIView):
    def post(self, request):
        data = _valid(CommitRequest, request)
        committed = attachments_commit(owner=request.user, ids=data["ids"], ref=data["ref"])
        return Response({"committed": committed, "ref": data["ref"]})



@extend_schema_view(**schema.SEARCH)
class SearchApi(APIView):
    def get(self, request):
        from ..search import search_documents

        query = request.query_params.get("q")
        if query is None or not query.strip():
            raise ValidationFailed(details={"q": ["A non-empty search query is required."]})
        query = query.replace("\x00", "")
        if len(query) > 200:
            raise ValidationFailed(details={"q": ["At most 200 characters."]})
        return Response({"results": search_documents(user=request.user, query=query)})
