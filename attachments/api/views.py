"""HTTP edge for profiles, the attachment resource and its gated files, search.

Each view validates with its InputSerializer, calls one service or selector and
renders with its OutputSerializer; the OpenAPI schema comes from the same
serializers. lifecycle.py and each concern's api.py (attachments/uploads/, …) hold
the rest of the API.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from datetime import datetime

from django.conf import settings
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_serializer,
    extend_schema_view,
)
from rest_framework import serializers
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from .. import waiting
from ..client_tokens.scope import ClientTokenScope
from ..errors import (
    BodyChecksumMismatch,
    NotAuthenticated,
    NotFound,
    NotReady,
    QuotaExceeded,
    RateLimited,
    SignatureInvalid,
    TooLarge,
    UnknownProfile,
    UrlExpired,
    ValidationFailed,
)
from ..models import TERMINAL_STATUSES, Attachment, Status
from ..profiles import all_profiles
from ..selectors import (
    attachment_visible,
    attachments_of_owner,
    can_read_file,
    derivative_of,
    full_size_refused,
    thumbnail_dims,
)
from ..services.connections import give_connection_back
from ..serving import derivative_response, served_object, served_response, stem
from ..subjects import parse_subject
from ..uploads.services.uploads import upload_through
from .delivery import SIGNED_LINK_NAMES, SIGNED_LINK_PARAMETERS, SignedOrAuthenticated, readable_attachment
from .http import content_length
from .links import absolute_url
from .query import DeclaredQuery
from .schema import ATTACHMENT_ID, errors, file_responses
from .serializers import AttachmentOutputSerializer, AttachmentResource, SharedSerializer

_TAGS = ["attachments"]
MAX_LISTED_IDS = 100  # one page; a waiter registers under each
_WAIT_MAX_SECONDS = 30


def _wait_parameter(what: str) -> OpenApiParameter:
    """The `?wait=` query parameter of the list and of one attachment, as _wait_seconds reads it."""
    return OpenApiParameter(
        "wait",
        {"type": "number", "minimum": 0, "maximum": _WAIT_MAX_SECONDS},
        description=f"{what} (0–{_WAIT_MAX_SECONDS}).",
    )


def shown(request, attachment: Attachment) -> AttachmentResource:
    """The attachment as the caller of `request` may see it."""
    user = request.user
    readable = can_read_file(user=user, attachment=attachment)
    url = absolute_url(request, f"/api/v1/attachments/{attachment.pk}")
    thumbnail = thumbnail_dims(attachment) if readable else None
    refused = full_size_refused(user=user, attachment=attachment)
    return AttachmentResource(attachment, url, readable, thumbnail, full_size_refused=refused)


def resource_for(request, attachment: Attachment) -> dict:
    """The attachment resource of docs/api.md for the caller of `request`."""
    return AttachmentOutputSerializer.render(shown(request, attachment))


@extend_schema_serializer(component_name="ProfileKind")
class ProfileKindSerializer(SharedSerializer):
    name = serializers.CharField(source="kind", help_text="`photo`, `video`.")
    allowed_types = serializers.ListField(child=serializers.CharField())
    max_bytes = serializers.IntegerField(help_text="The limit for a file whose bytes are of this kind.")
    derivatives = serializers.ListField(child=serializers.CharField())


@extend_schema_serializer(component_name="Profile")
class ProfileSerializer(SharedSerializer):
    name = serializers.CharField()
    allowed_types = serializers.ListField(child=serializers.CharField())
    max_bytes = serializers.IntegerField(help_text="With `kinds`: the largest kind's limit.")
    derivatives = serializers.ListField(child=serializers.CharField())
    single_per_owner = serializers.BooleanField()
    kinds = ProfileKindSerializer(
        many=True,
        help_text="Empty, or the kinds the profile processes each file as, chosen by the type found in its bytes "
        "(the `camera` profile: `photo`, `video`), each with its own limit.",
    )


class ProfilesApi(DeclaredQuery, APIView):
    client_token_allowed = True  # upload pages read the limits they upload within

    @extend_schema_serializer(component_name="Profiles")
    class OutputSerializer(SharedSerializer):
        profiles = ProfileSerializer(many=True)

    @extend_schema(
        operation_id="profiles_list",
        tags=["profiles"],
        summary="List the upload profiles",
        responses={
            200: OpenApiResponse(OutputSerializer, description="The configured profiles."),
            **errors(NotAuthenticated),
        },
    )
    def get(self, request):
        return Response(self.OutputSerializer.render({"profiles": all_profiles().values()}))


def _encode_cursor(attachment: Attachment) -> str:
    raw = f"{attachment.created_at.isoformat()}|{attachment.pk}"
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_cursor(value: str) -> tuple[datetime, uuid.UUID]:
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).decode()
        created, pk = raw.split("|", 1)
        return datetime.fromisoformat(created), uuid.UUID(pk)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise serializers.ValidationError("Invalid cursor.") from None


class AttachmentListApi(DeclaredQuery, APIView):
    client_token_allowed = True
    parser_classes = [MultiPartParser, FormParser]
    streams_body = True  # upload-through reads its form itself (ops/body_first.py)
    query_parameters = frozenset(
        {"status", "profile", "committed", "ref", "subject", "include", "limit", "cursor", "ids", "wait"}
    )

    @extend_schema_serializer(component_name="AttachmentList")
    class OutputSerializer(SharedSerializer):
        results = AttachmentOutputSerializer(many=True)
        next = serializers.URLField(allow_null=True, help_text="The next page (cursor), or null on the last page.")

    @extend_schema_serializer(component_name="AttachmentFilter")
    class FilterSerializer(SharedSerializer):
        # Query parameters: an empty one counts as absent.
        status = serializers.ChoiceField(choices=Status.choices, required=False)
        profile = serializers.CharField(required=False, help_text="A configured profile (GET /profiles).")
        committed = serializers.ChoiceField(choices=["true", "false"], required=False)
        ref = serializers.CharField(required=False, max_length=200, help_text="Only files committed to this ref.")
        subject = serializers.CharField(
            required=False,
            trim_whitespace=False,  # as the header: a padded id is malformed, not another subject
            help_text="Only files of this subject. A request confined to another subject (`Airlock-Subject`) "
            "gets an empty list.",
        )
        include = serializers.ChoiceField(
            choices=["removed"],
            required=False,
            help_text="`removed`: also discarded, deleted and released files whose grace is over (hidden otherwise).",
        )
        limit = serializers.IntegerField(required=False, help_text="Page size, 1–100 (default 50).")
        cursor = serializers.CharField(required=False, help_text="From a previous page's `next`.")
        ids = serializers.CharField(
            required=False,
            help_text=f"Only these attachments: comma-separated ids, at most "
            f"{MAX_LISTED_IDS}; the page size defaults to their number.",
        )

        def validate_ids(self, value: str) -> list[uuid.UUID]:
            parts = [part.strip() for part in value.split(",") if part.strip()]
            if not parts:
                raise serializers.ValidationError("Comma-separated attachment ids.")
            if len(parts) > MAX_LISTED_IDS:
                raise serializers.ValidationError(f"At most {MAX_LISTED_IDS} ids.")
            try:
                return list(dict.fromkeys(uuid.UUID(part) for part in parts))
            except ValueError:
                raise serializers.ValidationError("Comma-separated attachment ids.") from None

        def validate_subject(self, value: str) -> str:
            try:
                return parse_subject(value)
            except ValidationFailed as exc:
                raise serializers.ValidationError(exc.details["subject"]) from None

        def validate_cursor(self, value: str) -> tuple[datetime, uuid.UUID]:
            return _decode_cursor(value)

        def validate_profile(self, value: str) -> str:
            if value not in all_profiles():
                raise serializers.ValidationError("Unknown profile.")
            return value

    @extend_schema(
        operation_id="attachments_list",
        tags=_TAGS,
        summary="List your attachments",
        description="Newest first, cursor-paginated. With `ids` and `wait`, holds the request up to N seconds until "
        "one of the listed attachments changes status (or one is terminal): one request follows many files. Past "
        "the waiter caps it answers at once (`Airlock-Wait: skipped; reason=…`).",
        parameters=[
            FilterSerializer,
            _wait_parameter("With `ids`: seconds to wait for a change"),
        ],
        responses={
            200: OpenApiResponse(OutputSerializer, description="One page of your attachments."),
            **errors(ValidationFailed, NotAuthenticated),
        },
    )
    def get(self, request):
        filters = self.FilterSerializer.validate_body(request.query_params)
        ids = filters.get("ids")
        seconds = _wait_seconds(request.query_params.get("wait"), lambda: None)
        if seconds and not ids:
            raise ValidationFailed(details={"wait": ["Only with ids: the attachments to wait for."]})
        limit = min(100, max(1, filters.get("limit", len(ids) if ids else 50)))
        committed = filters.get("committed")

        def read() -> list[Attachment]:
            qs = attachments_of_owner(
                user=request.user,
                status=filters.get("status"),
                profile=filters.get("profile"),
                committed=None if committed is None else committed == "true",
                ref=filters.get("ref"),
                subject=filters.get("subject"),
                include_removed="include" in filters,
                before=filters.get("cursor"),
                ids=ids,
            )
            return list(qs.prefetch_related("derivatives")[: limit + 1])

        headers = {}
        if seconds:
            first = None

            def settled(rows: list[Attachment]) -> bool:
                # A change since this request's first read, or one to report at once.
                nonlocal first
                now = {attachment.pk: attachment.status for attachment in rows}
                if first is None:
                    first = now
                return now != first or any(s in TERMINAL_STATUSES for s in now.values())

            # One waiter for every listed id: woken by whichever changes first. A listed id
            # that is not the caller's is never in `rows`, so its changes cannot end the wait.
            waited = waiting.wait_until(
                user_id=request.user.pk,
                attachment_ids=[str(pk) for pk in ids],
                seconds=seconds,
                read=read,
                settled=settled,
            )
            page, headers = waited.value, _wait_headers(waited)
        else:
            page = read()
        has_more = len(page) > limit
        page = page[:limit]
        next_url = None
        if has_more:
            query = request.query_params.copy()
            query["cursor"] = _encode_cursor(page[-1])
            next_url = absolute_url(request, f"{request.path}?{query.urlencode()}")
        results = [shown(request, attachment) for attachment in page]
        return Response(self.OutputSerializer.render({"results": results, "next": next_url}), headers=headers)

    @extend_schema_serializer(component_name="UploadThrough")
    class UploadInputSerializer(SharedSerializer):
        # Names are checked by the service (UNKNOWN_PROFILE), as for an intent: taken as sent.
        profile = serializers.CharField(allow_blank=True, trim_whitespace=False)
        file = serializers.FileField(allow_empty_file=True, use_url=False)
        filename = serializers.CharField(
            required=False, allow_blank=True, trim_whitespace=False, help_text="Defaults to the uploaded file's name."
        )
        sha256 = serializers.CharField(
            required=False,
            max_length=64,
            help_text="Optional SHA-256 of the file, hex or base64: another body is "
            "refused (`400 CHECKSUM_MISMATCH`) and nothing is kept.",
        )

    @extend_schema(
        operation_id="attachments_upload",
        tags=["uploads"],
        summary="Upload a small file through the API",
        request={"multipart/form-data": UploadInputSerializer},
        responses={
            202: OpenApiResponse(AttachmentOutputSerializer, description="Stored; status `pending`."),
            **errors(
                ValidationFailed,
                UnknownProfile,
                NotAuthenticated,
                TooLarge,
                QuotaExceeded,
                RateLimited,
                BodyChecksumMismatch,
                CHECKSUM_MISMATCH="the file's SHA-256 is not the declared `sha256`; nothing kept",
                TOO_LARGE="over the profile's (or the upload-through) body limit",
                RATE_LIMITED="too many intents per minute or too many pending uploads (`Retry-After` is set)",
            ),
        },
    )
    def post(self, request):
        # Refuse before the multipart parser spools anything: the form overhead is small.
        cap = settings.AIRLOCK_MAX_BYTES.upload_through + 64 * 1024
        length = content_length(request._request)
        if length is not None and length > cap:
            raise TooLarge(
                f"The body is larger than the {settings.AIRLOCK_MAX_BYTES.upload_through} bytes allowed.",
                details={"max_bytes": settings.AIRLOCK_MAX_BYTES.upload_through},
            )
        give_connection_back()  # the multipart parser may wait on the client for long
        data = self.UploadInputSerializer.validate_body(request.data)
        upload = data["file"]
        attachment = upload_through(
            user=request.user,
            profile_name=data["profile"],
            filename=data.get("filename") or upload.name or "file",
            chunks=upload.chunks(64 * 1024),
            size_hint=upload.size or 0,
            declared_type=(upload.content_type or "")[:127],
            sha256=data.get("sha256"),
        )
        return Response(resource_for(request, attachment), status=202)


class AttachmentDetailApi(DeclaredQuery, APIView):
    client_token_allowed = frozenset({"GET", "HEAD"})  # not DELETE: a committed file would be released
    query_parameters = frozenset({"wait"})

    @extend_schema(
        operation_id="attachments_retrieve",
        tags=_TAGS,
        summary="Get one attachment",
        description="The owner sees every state; others of the same tenant only `ready`. With `wait`, holds the "
        "request up to N seconds until the status is terminal; past the waiter caps it answers at once "
        "(`Airlock-Wait: skipped; reason=…`).",
        parameters=[
            ATTACHMENT_ID,
            _wait_parameter("Seconds to wait for a terminal status"),
        ],
        responses={
            200: OpenApiResponse(AttachmentOutputSerializer, description="The attachment resource."),
            **errors(ValidationFailed, NotAuthenticated, NotFound),
        },
    )
    def get(self, request, attachment_id):
        def read():
            return attachment_visible(user=request.user, attachment_id=attachment_id)

        seconds = _wait_seconds(request.query_params.get("wait"), read)
        headers = {}
        if seconds:
            # Sleeps until a transition of this attachment is announced (no polling); its
            # first read, made once it listens, is also the visibility check.
            waited = waiting.wait_until(
                user_id=request.user.pk,
                attachment_ids=[str(attachment_id)],
                seconds=seconds,
                read=read,
                settled=lambda a: a.status in TERMINAL_STATUSES,
            )
            attachment, headers = waited.value, _wait_headers(waited)
        else:
            attachment = read()
        return Response(resource_for(request, attachment), headers=headers)


WAIT_HEADER = "Airlock-Wait"


def _wait_headers(waited: waiting.Waited) -> dict[str, str]:
    """`Airlock-Wait: skipped; reason=user-limit; limit=32` when the wait was not held."""
    if waited.skipped is None:
        return {}
    return {WAIT_HEADER: f"skipped; reason={waited.skipped.reason}; limit={waited.skipped.limit}"}


def _wait_seconds(wait: str | None, read) -> float:
    if wait is None:
        return 0.0
    try:
        seconds = float(wait)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= _WAIT_MAX_SECONDS:  # NaN fails this too
        read()  # an unknown attachment is a 404 before a bad parameter is a 400
        raise ValidationFailed(details={"wait": [f"A number of seconds, at most {_WAIT_MAX_SECONDS}."]})
    return seconds


_FILE_ERRORS = (ValidationFailed, NotAuthenticated, SignatureInvalid, UrlExpired, NotFound, NotReady)
_UNKNOWN_PARAMETER = "a query parameter the operation does not take (named in `details`)"
_NOT_READY = (
    "the owner's file is still `pending` or `processing` (`details.status`): no byte is served until it is `ready`"
)


class FileApi(DeclaredQuery, APIView):
    """A gated file read: by the caller's header or session, or by a signed link (api/delivery.py)."""

    client_token_allowed = True

    permission_classes = [SignedOrAuthenticated, ClientTokenScope]
    query_parameters = SIGNED_LINK_NAMES


class AttachmentDownloadApi(FileApi):
    @extend_schema(
        operation_id="attachments_download",
        tags=_TAGS,
        summary="Download the file (gated)",
        parameters=[ATTACHMENT_ID, *SIGNED_LINK_PARAMETERS],
        # The detected type of the bytes (image/jpeg, application/pdf, …).
        responses={
            **file_responses("*/*"),
            **errors(*_FILE_ERRORS, NOT_READY=_NOT_READY, VALIDATION_ERROR=_UNKNOWN_PARAMETER),
        },
    )
    def get(self, request, attachment_id):
        attachment = readable_attachment(request, attachment_id=attachment_id, name="download")
        served = served_object(attachment)
        if served is None:
            raise NotFound()
        return served_response(request, attachment, served, inline=False)


# A ready attachment's derivative of `kind`, served as `<the original's stem>.<suffix>`. (A comment, not a
# docstring: the operations keep FileApi's description.)
class DerivativeApi(FileApi):
    kind: str
    stem_word: str  # the name's stem when the original's filename has none
    suffix: str
    suffixes: dict[str, str] = {}  # by the derivative's content type, where it varies

    def get(self, request, attachment_id):
        attachment = readable_attachment(request, attachment_id=attachment_id, name=self.kind)
        derivative = derivative_of(attachment, self.kind)
        if derivative is None:
            raise NotFound()
        suffix = self.suffixes.get(derivative.content_type, self.suffix)
        return derivative_response(
            request, derivative, filename=f"{stem(attachment.filename, self.stem_word)}.{suffix}"
        )


def _derivative_schema(kind: str, summary: str, media_type: str, **not_ready: str):
    return extend_schema_view(
        get=extend_schema(
            operation_id=f"attachments_{kind}",
            tags=_TAGS,
            summary=summary,
            parameters=[ATTACHMENT_ID, *SIGNED_LINK_PARAMETERS],
            responses={
                **file_responses(media_type),
                **errors(*_FILE_ERRORS, **not_ready, VALIDATION_ERROR=_UNKNOWN_PARAMETER),
            },
        )
    )


@_derivative_schema("thumbnail", "Get the thumbnail (WebP, gated)", "image/webp", NOT_READY=_NOT_READY)
class AttachmentThumbnailApi(DerivativeApi):
    kind = stem_word = "thumbnail"
    suffix = "webp"


@_derivative_schema(
    "display",
    "Get the display rendition of a HEIC/HEIF/AVIF photo (JPEG or WebP, gated)",
    "image/jpeg",
    NOT_READY=_NOT_READY,
)
class AttachmentDisplayApi(DerivativeApi):
    kind = stem_word = "display"
    suffix, suffixes = "jpg", {"image/webp": "webp"}


@_derivative_schema("poster", "Get the poster frame of a video (WebP, gated)", "image/webp", NOT_READY=_NOT_READY)
class AttachmentPosterApi(DerivativeApi):
    kind = stem_word = "poster"
    suffix = "webp"


@_derivative_schema("web", "Get the web rendition of a video (H.264 + AAC in MP4, gated)", "video/mp4")
class AttachmentWebApi(DerivativeApi):
    kind, stem_word, suffix = "web", "video", "mp4"


@extend_schema_serializer(component_name="SearchResult")
class SearchResultSerializer(SharedSerializer):
    id = serializers.UUIDField()
    filename = serializers.CharField()
    snippet = serializers.CharField(allow_blank=True, help_text="Plain text, no markup: escape it to render it.")


class SearchApi(DeclaredQuery, APIView):
    query_parameters = frozenset({"q"})

    @extend_schema_serializer(component_name="SearchResponse")
    class OutputSerializer(SharedSerializer):
        results = SearchResultSerializer(many=True, help_text="At most 50.")

    @extend_schema(
        operation_id="search",
        tags=["search"],
        summary="Full-text search over document text",
        parameters=[
            OpenApiParameter(
                "q",
                {"type": "string", "minLength": 1, "maxLength": 200, "pattern": r"\S"},
                required=True,
                description="1–200 characters, not only spaces.",
            )
        ],
        responses={
            200: OpenApiResponse(OutputSerializer, description="Matching documents you may read."),
            **errors(ValidationFailed, NotAuthenticated),
        },
    )
    def get(self, request):
        from ..search import search_documents

        query = request.query_params.get("q")
        if query is None or not query.strip():
            raise ValidationFailed(details={"q": ["A non-empty search query is required."]})
        query = query.replace("\x00", "")
        if len(query) > 200:
            raise ValidationFailed(details={"q": ["At most 200 characters."]})
        return Response(self.OutputSerializer.render({"results": search_documents(user=request.user, query=query)}))
