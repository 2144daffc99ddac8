"""OpenAPI documentation of the v1 contract (API.md), for drf-spectacular.

The serializers here only *describe* requests and responses (the views build
their bodies themselves); nothing at run time validates with them. Each view
in views.py carries ``@extend_schema_view(**schema.<NAME>)``; the plain
Django upload view (``PUT /uploads/{id}/content``) and the storage-events
endpoint are documented here too (``postprocess`` and ``_annotate_storage_events``).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import serializers

from .serializers import CommitRequest, IdsRequest, IntentRequest


# Request bodies: the views' own validators, under documentation names
# (components "UploadIntentRequest", "HeartbeatRequest", "CommitRequest").
class UploadIntentSerializer(IntentRequest):
    pass


class HeartbeatSerializer(IdsRequest):
    pass


class CommitSerializer(CommitRequest):
    pass


# --- errors ----------------------------------------------------------------------

ERROR_CODES = (
    "VALIDATION_ERROR",
    "UNKNOWN_PROFILE",
    "TYPE_NOT_ALLOWED",
    "NOT_AUTHENTICATED",
    "UPLOAD_TOKEN_INVALID",
    "NOT_FOUND",
    "ALREADY_COMMITTED",
    "ALREADY_UPLOADED",
    "UPLOAD_NOT_IN_PROGRESS",
    "TOO_LARGE",
    "QUOTA_EXCEEDED",
    "ATTACHMENT_INVALID",
    "RATE_LIMITED",
    "UNAVAILABLE",
)


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(
        help_text="Machine-readable error code: " + ", ".join(ERROR_CODES) + "."
    )
    message = serializers.CharField(help_text="Human-readable explanation.")
    details = serializers.DictField(
        child=serializers.JSONField(),
        help_text="Field → messages for VALIDATION_ERROR, id → reason for ATTACHMENT_INVALID, "
        "limits for TOO_LARGE and RATE_LIMITED, {quota, used, limit, requested} for QUOTA_EXCEEDED; "
        "empty otherwise.",
    )


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()


_ERROR_TEXT = {
    400: "`VALIDATION_ERROR` (malformed JSON, not an object, wrong types, missing fields; details: field → "
    "messages)",
    401: "`NOT_AUTHENTICATED`: no or bad credentials",
    403: "`UPLOAD_TOKEN_INVALID`: the signed upload URL is tampered with, expired, or for another intent",
    404: "`NOT_FOUND`: does not exist or the caller may not see it",
    409: "conflict",
    413: "`TOO_LARGE`: the body is over the limit",
    422: "`ATTACHMENT_INVALID`",
    429: "`RATE_LIMITED`: too many intents per minute or too many pending uploads (`Retry-After` is set)",
    503: "`UNAVAILABLE`: a dependency this request needs is down; retry later",
}


def error(status: int, text: str | None = None) -> OpenApiResponse:
    return OpenApiResponse(ErrorSerializer, description=text or _ERROR_TEXT[status])


def errors(*statuses: int, **texts: str) -> dict[int, OpenApiResponse]:
    """Error responses for `statuses` (always with 503); texts: ``e400="…"`` overrides a description."""
    return {s: error(s, texts.get(f"e{s}")) for s in sorted({*statuses, 503})}


# --- the attachment resource -------------------------------------------------------

STATUSES = ("pending", "processing", "ready", "rejected", "failed")


class ReasonSerializer(serializers.Serializer):
    code = serializers.CharField(
        help_text="Rejection: too_large, type_not_allowed, malware, pixel_limit, "
        "page_limit, archive_limit, duration_limit, corrupt, timeout, "
        "object_missing, moderator. Failure: infrastructure."
    )
    message = serializers.CharField(allow_blank=True)


class LinksSerializer(serializers.Serializer):
    self = serializers.URLField()
    download = serializers.URLField(
        required=False, help_text="Present only when the caller may read the file."
    )
    thumbnail = serializers.URLField(
        required=False, help_text="Present only when a thumbnail may be read."
    )


class AttachmentMetadataSerializer(serializers.Serializer):
    width = serializers.IntegerField(allow_null=True)
    height = serializers.IntegerField(allow_null=True)
    page_count = serializers.IntegerField(allow_null=True)
    entries = serializers.IntegerField(allow_null=True, required=False, help_text="Archives only.")
    total_bytes = serializers.IntegerField(
        allow_null=True, required=False, help_text="Archives only."
    )


class AttachmentSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    profile = serializers.CharField()
    status = serializers.ChoiceField(choices=STATUSES)
    reason = ReasonSerializer(allow_null=True, help_text="Null unless rejected or failed.")
    filename = serializers.CharField()
    size = serializers.IntegerField(
        allow_null=True, help_text="Bytes served by `download` (null until ready)."
    )
    content_type = serializers.CharField(
        allow_null=True, help_text="Detected from the bytes (null until ready)."
    )
    sha256 = serializers.CharField(
        allow_null=True, help_text="Of the served bytes (null until ready)."
    )
    created_at = serializers.DateTimeField()
    ready_at = serializers.DateTimeField(allow_null=True)
    expires_at = serializers.DateTimeField(allow_null=True, help_text="Null once committed.")
    committed = serializers.BooleanField()
    ref = serializers.CharField(allow_null=True)
    derivatives = serializers.DictField(
        child=serializers.JSONField(),
        help_text='Per kind, e.g. {"thumbnail": {"width": 256, "height": 192}}, "page_count", "entries".',
    )
    metadata = AttachmentMetadataSerializer()
    links = LinksSerializer()


class AttachmentListSerializer(serializers.Serializer):
    results = AttachmentSerializer(many=True)
    next = serializers.URLField(
        allow_null=True, help_text="The next page (cursor), or null on the last page."
    )


# --- intents -----------------------------------------------------------------------


class UploadPartSerializer(serializers.Serializer):
    part_number = serializers.IntegerField(min_value=1)
    url = serializers.URLField()


class UploadInstructionSerializer(serializers.Serializer):
    method = serializers.ChoiceField(choices=["PUT", "POST"])
    url = serializers.URLField()
    headers = serializers.DictField(
        child=serializers.CharField(allow_blank=True), help_text="Send exactly these headers (PUT)."
    )
    # DRF's metaclass takes declared fields out of the class: this does not shadow Serializer.fields.
    fields = serializers.DictField(  # type: ignore[assignment]
        child=serializers.CharField(allow_blank=True), help_text="Form fields before `file` (POST)."
    )
    expires_at = serializers.DateTimeField()
    part_size = serializers.IntegerField(required=False, help_text="S3 multipart only.")
    parts = UploadPartSerializer(
        many=True, required=False, help_text="S3 multipart only: PUT each part."
    )
    complete_url = serializers.URLField(
        required=False, help_text="S3 multipart only: POST the parts' ETags."
    )


class IntentResponseSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    status = serializers.ChoiceField(choices=["pending"])
    profile = serializers.CharField()
    expires_at = serializers.DateTimeField()
    upload = UploadInstructionSerializer()


class UploadThroughSerializer(serializers.Serializer):
    profile = serializers.CharField()
    file = serializers.FileField()
    filename = serializers.CharField(
        required=False, help_text="Defaults to the uploaded file's name."
    )


class UploadCompletePartSerializer(serializers.Serializer):
    part_number = serializers.IntegerField(min_value=1, max_value=10_000)
    etag = serializers.CharField(max_length=128)


class UploadCompleteSerializer(serializers.Serializer):
    parts = UploadCompletePartSerializer(
        many=True, required=False, help_text="S3 multipart intents only; omit for the plain hint."
    )


class UploadedPartSerializer(serializers.Serializer):
    part_number = serializers.IntegerField(min_value=1)
    etag = serializers.CharField()
    size = serializers.IntegerField()


class PartsResponseSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    part_size = serializers.IntegerField()
    expires_at = serializers.DateTimeField(help_text="When the new part URLs expire.")
    parts = UploadPartSerializer(many=True, help_text="The parts still to upload, freshly signed.")
    uploaded_parts = UploadedPartSerializer(many=True, help_text="Parts already in storage (keep their ETags).")
    complete_url = serializers.URLField()


# --- other responses -----------------------------------------------------------------


class ProfileSerializer(serializers.Serializer):
    name = serializers.CharField()
    allowed_types = serializers.ListField(child=serializers.CharField())
    max_bytes = serializers.IntegerField()
    derivatives = serializers.ListField(child=serializers.CharField())
    single_per_owner = serializers.BooleanField()


class ProfilesSerializer(serializers.Serializer):
    profiles = ProfileSerializer(many=True)


class HeartbeatEntrySerializer(serializers.Serializer):
    id = serializers.CharField()
    expires_at = serializers.DateTimeField(
        allow_null=True, help_text="Null for committed attachments."
    )


class HeartbeatResponseSerializer(serializers.Serializer):
    attachments = HeartbeatEntrySerializer(many=True)
    missing = serializers.ListField(
        child=serializers.CharField(),
        help_text="Unknown, not yours, discarded or expired (no distinction).",
    )


class CommitResponseSerializer(serializers.Serializer):
    committed = serializers.ListField(child=serializers.CharField())
    ref = serializers.CharField()


class DiscardAllResponseSerializer(serializers.Serializer):
    discarded = serializers.IntegerField(min_value=0)


class SearchResultSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    filename = serializers.CharField()
    snippet = serializers.CharField(
        allow_blank=True, help_text="Plain text, no markup: escape it to render it."
    )


class SearchResponseSerializer(serializers.Serializer):
    results = SearchResultSerializer(many=True, help_text="At most 50.")


class StorageEventsAcceptedSerializer(serializers.Serializer):
    accepted = serializers.IntegerField(
        min_value=0, help_text="Records handled (duplicates included)."
    )


# --- per-view annotations (used as @extend_schema_view(**NAME) in views.py) -------------

ATTACHMENT_ID = OpenApiParameter(
    "attachment_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The attachment's id."
)
_TAG_UPLOADS, _TAG_ATTACHMENTS, _TAG_LIFECYCLE = ["uploads"], ["attachments"], ["lifecycle"]

PROFILES = {
    "get": extend_schema(
        operation_id="profiles_list",
        tags=["profiles"],
        summary="List the upload profiles",
        responses={
            200: OpenApiResponse(ProfilesSerializer, description="The configured profiles."),
            **errors(401),
        },
    )
}

UPLOAD_INTENT = {
    "post": extend_schema(
        operation_id="uploads_create",
        tags=_TAG_UPLOADS,
        summary="Create an upload intent",
        description="Validates the declared size and type against the profile, creates the pending attachment and "
        "returns where to send the bytes (PUT with `headers`, or multipart POST with `fields` then "
        "`file`). The URL is single-use and expires.",
        request=UploadIntentSerializer,
        responses={
            201: OpenApiResponse(
                IntentResponseSerializer,
                description="The pending attachment and where to send its bytes.",
            ),
            **errors(
                400,
                401,
                413,
                429,
                e400="`VALIDATION_ERROR`, `UNKNOWN_PROFILE` (profile not configured) or `TYPE_NOT_ALLOWED` "
                "(content_type not in the profile's allowlist)",
                e413="`TOO_LARGE`: the declared size is over the profile's limit, or the request body is too large; "
                "`QUOTA_EXCEEDED`: the tenant's byte or file quota has no room for it",
            ),
        },
    )
}

UPLOAD_COMPLETE = {
    "post": extend_schema(
        operation_id="uploads_complete",
        tags=_TAG_UPLOADS,
        summary="Tell the server the bytes are in place",
        description="Optional hint for storage without event notifications; the server checks storage itself. "
        "Idempotent. For S3 multipart intents, send the parts' ETags.",
        parameters=[ATTACHMENT_ID],
        request=UploadCompleteSerializer,
        responses={
            202: OpenApiResponse(AttachmentSerializer, description="The attachment resource."),
            **errors(400, 401, 404, 413),
        },
    )
}

UPLOAD_PARTS = {
    "post": extend_schema(
        operation_id="uploads_parts_resign",
        tags=_TAG_UPLOADS,
        summary="Re-sign the remaining part URLs of a multipart upload",
        description="For the caller's in-progress S3 multipart intent: fresh presigned URLs for every part "
        "not yet in storage, and the parts already uploaded (with their ETags), so an upload whose part "
        "URLs expired can resume. No body.",
        parameters=[ATTACHMENT_ID],
        request=None,
        responses={
            200: OpenApiResponse(PartsResponseSerializer, description="The remaining parts, re-signed."),
            **errors(401, 404, 409, e409="`UPLOAD_NOT_IN_PROGRESS`: not a multipart intent, already "
                     "assembled, aborted, expired, discarded or no longer pending"),
        },
    )
}

ATTACHMENT_LIST = {
    "get": extend_schema(
        operation_id="attachments_list",
        tags=_TAG_ATTACHMENTS,
        summary="List your attachments",
        description="Newest first, cursor-paginated.",
        parameters=[
            OpenApiParameter("status", OpenApiTypes.STR, enum=list(STATUSES)),
            OpenApiParameter("profile", OpenApiTypes.STR),
            OpenApiParameter("committed", OpenApiTypes.STR, enum=["true", "false"]),
            OpenApiParameter(
                "limit", OpenApiTypes.INT, description="Page size, 1–100 (default 50)."
            ),
            OpenApiParameter(
                "cursor", OpenApiTypes.STR, description="From a previous page's `next`."
            ),
        ],
        responses={
            200: OpenApiResponse(
                AttachmentListSerializer, description="One page of your attachments."
            ),
            **errors(400, 401),
        },
    ),
    "post": extend_schema(
        operation_id="attachments_upload",
        tags=_TAG_UPLOADS,
        summary="Upload a small file through the API",
        request={"multipart/form-data": UploadThroughSerializer},
        responses={
            202: OpenApiResponse(AttachmentSerializer, description="Stored; status `pending`."),
            **errors(
                400,
                401,
                413,
                429,
                e400="`VALIDATION_ERROR` or `UNKNOWN_PROFILE`",
                e413="`TOO_LARGE`: over the profile's (or the upload-through) body limit; `QUOTA_EXCEEDED`: the "
                "tenant's byte or file quota has no room for it",
            ),
        },
    ),
}

ATTACHMENT_DETAIL = {
    "get": extend_schema(
        operation_id="attachments_retrieve",
        tags=_TAG_ATTACHMENTS,
        summary="Get one attachment",
        description="The owner sees every state; others of the same tenant only `ready`. With `wait`, holds "
        "the request up to N seconds until the status is terminal.",
        parameters=[
            ATTACHMENT_ID,
            OpenApiParameter(
                "wait",
                {"type": "number", "minimum": 0, "maximum": 30},
                description="Seconds to wait for a terminal status (0–30).",
            ),
        ],
        responses={
            200: OpenApiResponse(AttachmentSerializer, description="The attachment resource."),
            **errors(400, 401, 404),
        },
    )
}

_FILE_RESPONSE = OpenApiResponse(
    OpenApiTypes.BINARY,
    description="The file (Range supported). `Content-Disposition` uses the RFC 5987 form; "
    "`X-Content-Type-Options: nosniff`; `Content-Security-Policy: default-src 'none'; sandbox`.",
)
_FILE_RANGE = OpenApiResponse(
    OpenApiTypes.BINARY, description="Partial content for a `Range` request."
)
_FILE_REDIRECT = OpenApiResponse(description="S3 backend: redirect to a short-lived presigned GET.")
_RANGE_UNSATISFIABLE = OpenApiResponse(description="The `Range` is outside the file.")

ATTACHMENT_DOWNLOAD = {
    "get": extend_schema(
        operation_id="attachments_download",
        tags=_TAG_ATTACHMENTS,
        summary="Download the file (gated)",
        parameters=[ATTACHMENT_ID],
        responses={
            # The detected type of the bytes (image/jpeg, application/pdf, …).
            (200, "*/*"): _FILE_RESPONSE,
            (206, "*/*"): _FILE_RANGE,
            302: _FILE_REDIRECT,
            416: _RANGE_UNSATISFIABLE,
            **errors(401, 404),
        },
    )
}

ATTACHMENT_THUMBNAIL = {
    "get": extend_schema(
        operation_id="attachments_thumbnail",
        tags=_TAG_ATTACHMENTS,
        summary="Get the thumbnail (WebP, gated)",
        parameters=[ATTACHMENT_ID],
        responses={
            (200, "image/webp"): _FILE_RESPONSE,
            (206, "image/webp"): _FILE_RANGE,
            302: _FILE_REDIRECT,
            416: _RANGE_UNSATISFIABLE,
            **errors(401, 404),
        },
    )
}

HEARTBEAT = {
    "post": extend_schema(
        operation_id="attachments_heartbeat",
        tags=_TAG_LIFECYCLE,
        summary="Keep staged attachments alive",
        request=HeartbeatSerializer,
        responses={
            200: OpenApiResponse(
                HeartbeatResponseSerializer, description="New expiries, and the ids that are gone."
            ),
            **errors(400, 401, 413),
        },
    )
}

DISCARD = {
    "post": extend_schema(
        operation_id="attachments_discard",
        tags=_TAG_LIFECYCLE,
        summary="Discard one attachment",
        description="Idempotent; the sweeper reaps it on its next tick.",
        parameters=[ATTACHMENT_ID],
        request=None,
        responses={
            204: OpenApiResponse(description="Discarded."),
            **errors(
                401,
                404,
                409,
                e409="`ALREADY_COMMITTED`: a committed attachment cannot be discarded",
            ),
        },
    )
}

DISCARD_ALL = {
    "post": extend_schema(
        operation_id="attachments_discard_all",
        tags=_TAG_LIFECYCLE,
        summary="Discard every staged, uncommitted attachment of yours",
        request=None,
        responses={
            200: OpenApiResponse(
                DiscardAllResponseSerializer, description="How many were discarded."
            ),
            **errors(401),
        },
    )
}

COMMIT = {
    "post": extend_schema(
        operation_id="attachments_commit",
        tags=_TAG_LIFECYCLE,
        summary="Commit attachments to a reference",
        description="All or nothing. Re-committing to the same ref is a no-op.",
        request=CommitSerializer,
        responses={
            200: OpenApiResponse(CommitResponseSerializer, description="All committed."),
            **errors(
                400,
                401,
                413,
                422,
                e422="`ATTACHMENT_INVALID`: details map each bad id to not_found, expired, discarded, "
                "already_committed, rejected or failed",
            ),
        },
    )
}

SEARCH = {
    "get": extend_schema(
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
            200: OpenApiResponse(
                SearchResponseSerializer, description="Matching documents you may read."
            ),
            **errors(400, 401),
        },
    )
}

_S3_EVENT = {
    "type": "object",
    "description": "An S3 event notification document (S3/SQS, MinIO webhook, R2 relay).",
    "properties": {
        "Records": {"type": "array", "items": {"type": "object", "additionalProperties": True}}
    },
    "additionalProperties": True,
}

STORAGE_EVENTS = {
    "post": extend_schema(
        operation_id="storage_events_create",
        tags=["storage"],
        summary="Receive S3-compatible storage events",
        description="At-least-once, possibly out of order; duplicates are harmless. Objects at keys the service "
        "never issued are deleted, never processed.",
        # A security requirement object, as the schema needs it (drf-spectacular's hint says str).
        auth=[{"storageEventsBearer": []}],  # type: ignore[list-item]
        request={"application/json": _S3_EVENT},
        responses={
            202: OpenApiResponse(StorageEventsAcceptedSerializer, description="Recorded."),
            **errors(
                400,
                401,
                413,
                e401="`NOT_AUTHENTICATED`: missing or wrong storage-events bearer token",
            ),
        },
    )
}


def _annotate_storage_events() -> None:
    """StorageEventsApi lives in its own module; document it from here."""
    from .storage_events import StorageEventsApi

    extend_schema_view(**STORAGE_EVENTS)(StorageEventsApi)


_annotate_storage_events()


# --- components and the plain Django upload view ---------------------------------------

SECURITY_SCHEMES = {
    "uploadToken": {
        "type": "apiKey",
        "in": "query",
        "name": "token",
        "description": "The signed, single-use token of an upload URL (`PUT /uploads/{id}/content`).",
    },
    "storageEventsBearer": {
        "type": "http",
        "scheme": "bearer",
        "description": "`Authorization: Bearer <AIRLOCK_STORAGE_EVENTS_TOKEN>`.",
    },
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _error_response(text: str) -> dict[str, Any]:
    return {"description": text, "content": {"application/json": {"schema": _ref("Error")}}}


UPLOAD_CONTENT_OPERATION: dict[str, Any] = {
    "operationId": "uploads_content_put",
    "summary": "Send the bytes of an upload intent (local storage backend)",
    "description": "The raw body is the file. The `token` of the upload URL is the only credential. The "
    "server stops reading once the body passes the limit (413, nothing kept). A refused "
    "attempt does not use the URL up.",
    "tags": ["uploads"],
    "parameters": [
        {
            "in": "path",
            "name": "attachment_id",
            "required": True,
            "schema": {"type": "string", "format": "uuid"},
            "description": "The intent's attachment id.",
        },
    ],
    "requestBody": {
        "required": True,
        "content": {
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
            "*/*": {"schema": {"type": "string", "format": "binary"}},
        },
    },
    "security": [{"uploadToken": []}],
    "responses": {
        "202": {
            "description": "Stored; processing starts.",
            "content": {"application/json": {"schema": _ref("Attachment")}},
        },
        "400": _error_response("`VALIDATION_ERROR`: the request could not be read"),
        "403": _error_response(_ERROR_TEXT[403]),
        "404": _error_response(
            "`NOT_FOUND`: the intent no longer accepts uploads (discarded or expired)"
        ),
        "409": _error_response("`ALREADY_UPLOADED`: a second upload to the same intent"),
        "413": _error_response(
            "`TOO_LARGE`: the body is over the declared size or the profile's limit"
        ),
        "503": _error_response(_ERROR_TEXT[503]),
    },
}


def _profile_enums(schemas: dict[str, Any]) -> None:
    """The configured profiles and their types, read when the schema is generated (they are settings)."""
    from ..profiles import all_profiles

    profiles = all_profiles()
    names = sorted(profiles)
    types = sorted({t for profile in profiles.values() for t in profile.allowed_types})
    for component in ("UploadIntentRequest", "UploadThroughRequest"):
        props = schemas.get(component, {}).get("properties", {})
        if "profile" in props:
            props["profile"].update(enum=names, description="A configured profile (GET /profiles).")
        if "content_type" in props:
            props["content_type"].update(
                enum=types,
                description="Declared type; must be in the profile's allowlist (else TYPE_NOT_ALLOWED).",
            )
    ids = schemas.get("CommitRequest", {}).get("properties", {}).get("ids")
    if ids is not None:
        ids["minItems"] = 1
    ids = schemas.get("HeartbeatRequest", {}).get("properties", {}).get("ids")
    if ids is not None:
        ids["minItems"] = 1


_ID = "$response.body#/id"
LINKS: dict[tuple[str, str, str], dict[str, Any]] = {
    ("/api/v1/uploads", "post", "201"): {
        "GetAttachment": {
            "operationId": "attachments_retrieve",
            "parameters": {"attachment_id": _ID},
        },
        "CompleteUpload": {"operationId": "uploads_complete", "parameters": {"attachment_id": _ID}},
        "DiscardAttachment": {
            "operationId": "attachments_discard",
            "parameters": {"attachment_id": _ID},
        },
        "CommitAttachment": {
            "operationId": "attachments_commit",
            "requestBody": {"ids": [_ID], "ref": "fuzz:1"},
        },
        "HeartbeatAttachment": {
            "operationId": "attachments_heartbeat",
            "requestBody": {"ids": [_ID]},
        },
    },
    ("/api/v1/attachments", "post", "202"): {
        "GetAttachment": {
            "operationId": "attachments_retrieve",
            "parameters": {"attachment_id": _ID},
        },
        "DownloadAttachment": {
            "operationId": "attachments_download",
            "parameters": {"attachment_id": _ID},
        },
        "ThumbnailAttachment": {
            "operationId": "attachments_thumbnail",
            "parameters": {"attachment_id": _ID},
        },
        "DiscardAttachment": {
            "operationId": "attachments_discard",
            "parameters": {"attachment_id": _ID},
        },
    },
}


def _inline_nullable_refs(schemas: dict[str, Any]) -> None:
    """``{"allOf": [$ref], "nullable": true}`` → the referenced object made nullable.

    OpenAPI 3.0 validators disagree on whether `nullable` next to `allOf`
    admits null; an inlined object with `nullable: true` means the same
    thing to all of them (the attachment's `reason` is null until rejected).
    """
    for component in schemas.values():
        for name, prop in list(component.get("properties", {}).items()):
            refs = prop.get("allOf")
            if (
                prop.get("nullable")
                and isinstance(refs, list)
                and len(refs) == 1
                and "$ref" in refs[0]
            ):
                target = schemas.get(refs[0]["$ref"].rsplit("/", 1)[1])
                if target is not None:
                    inlined = {k: v for k, v in prop.items() if k != "allOf"}
                    component["properties"][name] = {**target, **inlined}


def postprocess(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """drf-spectacular hook: the plain Django upload view, security schemes, profile enums, links."""
    paths = result.setdefault("paths", {})
    paths.setdefault("/api/v1/uploads/{attachment_id}/content", {})["put"] = (
        UPLOAD_CONTENT_OPERATION
    )
    components = result.setdefault("components", {})
    components.setdefault("securitySchemes", {}).update(SECURITY_SCHEMES)
    _profile_enums(components.setdefault("schemas", {}))
    _inline_nullable_refs(components["schemas"])
    for (path, method, status), links in LINKS.items():
        response = paths.get(path, {}).get(method, {}).get("responses", {}).get(status)
        if response is not None:
            response["links"] = links
    result["paths"] = dict(sorted(paths.items()))
    return result
