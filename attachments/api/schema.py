"""What the OpenAPI document cannot derive from the views and their serializers (drf-spectacular).

Requests and responses are documented by each view's own serializers and
``@extend_schema`` (views.py, lifecycle.py, usage.py, storage_events.py and
each concern's api.py); error responses by the AirlockError classes a view names
(``errors``). Left here: the plain Django upload view (``PUT
/uploads/{id}/content``), security schemes, the configured profiles as enums,
the links schemathesis follows, and one OpenAPI 3.0 nullability fix.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse

from ..errors import (
    AirlockError,
    AlreadyUploaded,
    BodyChecksumMismatch,
    NotFound,
    TooLarge,
    Unavailable,
    UploadTokenInvalid,
    ValidationFailed,
)
from .serializers import ErrorSerializer


def error_texts(*raised: type[AirlockError], **texts: str) -> dict[int, str]:
    """Status → "`CODE`: when; …" for the errors an operation answers with (Unavailable always).

    The wording is the class's default message unless `texts` says it better
    for this operation, keyed by the code (``TOO_LARGE="…"``).
    """
    errors: dict[type[AirlockError], None] = dict.fromkeys((*raised, Unavailable))
    unknown = set(texts) - {error.code for error in errors}
    if unknown:
        raise ValueError(f"texts for codes this operation does not answer with: {sorted(unknown)}")
    by_status: dict[int, list[str]] = defaultdict(list)
    for error in errors:
        text = texts.get(error.code, error.default_message)
        by_status[error.status].append(f"`{error.code}`: {text}{'' if text.endswith('.') else '.'}")
    return {status: " ".join(by_status[status]) for status in sorted(by_status)}


def errors(*raised: type[AirlockError], **texts: str) -> dict[int, OpenApiResponse]:
    """The error responses of an operation, from the AirlockError classes it can answer with."""
    return {
        status: OpenApiResponse(ErrorSerializer, description=text)
        for status, text in error_texts(*raised, **texts).items()
    }


JSON_TOO_LARGE = "the JSON body is over 2 MiB"  # DATA_UPLOAD_MAX_MEMORY_SIZE, answered by errors.exception_handler


ATTACHMENT_ID = OpenApiParameter(
    "attachment_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The attachment's id."
)


def file_responses(media_type: str) -> dict[Any, OpenApiResponse]:
    """The success responses of a gated file read whose bytes are `media_type`."""
    return {
        (200, media_type): OpenApiResponse(
            OpenApiTypes.BINARY,
            description="The file (Range supported). `Content-Disposition` uses the RFC 5987 form; "
            "`X-Content-Type-Options: nosniff`; `Content-Security-Policy: default-src 'none'; sandbox`.",
        ),
        (206, media_type): OpenApiResponse(OpenApiTypes.BINARY, description="Partial content for a `Range` request."),
        302: OpenApiResponse(description="S3 backend: redirect to a short-lived presigned GET."),
        416: OpenApiResponse(description="The `Range` is outside the file."),
    }


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


_REQUEST_LINE_TOO_LONG = _error_response(
    "`ERROR`: the request line (method, path and query string) is over 4,094 bytes; refused by the HTTP server."
)

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
        }
    ],
    "requestBody": {
        "required": True,
        "content": {
            media: {"schema": {"type": "string", "format": "binary"}} for media in ("application/octet-stream", "*/*")
        },
    },
    "security": [{"uploadToken": []}],
    "responses": {
        "202": {
            "description": "Stored; processing starts.",
            "content": {"application/json": {"schema": _ref("Attachment")}},
        },
        **{
            str(status): _error_response(text)
            for status, text in error_texts(
                ValidationFailed,
                UploadTokenInvalid,
                NotFound,
                AlreadyUploaded,
                TooLarge,
                BodyChecksumMismatch,
                CHECKSUM_MISMATCH="the body's SHA-256 is not the intent's `sha256`; nothing kept, the URL not used up",
                VALIDATION_ERROR="no Content-Length, a body shorter than it, or a body that could not be read",
                NOT_FOUND="the intent no longer accepts uploads (discarded or expired)",
                TOO_LARGE="the body is over the declared size or the profile's limit",
            ).items()
        },
    },
}


def _profile_enums(schemas: dict[str, Any]) -> None:
    """The configured profiles' names and the declared type's rule, read when the schema is generated."""
    from ..profiles import all_profiles

    profiles = all_profiles()
    names = sorted(profiles)
    for component in ("UploadIntentRequest", "UploadThroughRequest"):
        props = schemas.get(component, {}).get("properties", {})
        if "profile" in props:
            props["profile"].update(enum=names, description="A configured profile (GET /profiles).")
        if "content_type" in props:
            props["content_type"].update(
                description="Declared type, recorded as `declared_type`; the bytes decide. Empty or "
                "`application/octet-stream` when unknown. TYPE_NOT_ALLOWED only for a specific type the profile "
                "does not allow when the file name's extension names no type it allows.",
            )


_ID = "$response.body#/id"


def _by_id(**operations: str) -> dict[str, Any]:
    return {name: {"operationId": op, "parameters": {"attachment_id": _ID}} for name, op in operations.items()}


# The stateful links schemathesis follows from a created attachment to what can be done with it.
LINKS: dict[tuple[str, str, str], dict[str, Any]] = {
    ("/api/v1/uploads", "post", "201"): {
        **_by_id(
            GetAttachment="attachments_retrieve",
            CompleteUpload="uploads_complete",
            DiscardAttachment="attachments_discard",
        ),
        "CommitAttachment": {"operationId": "attachments_commit", "requestBody": {"ids": [_ID], "ref": "fuzz:1"}},
        "HeartbeatAttachment": {"operationId": "attachments_heartbeat", "requestBody": {"ids": [_ID]}},
    },
    ("/api/v1/attachments", "post", "202"): _by_id(
        GetAttachment="attachments_retrieve",
        DownloadAttachment="attachments_download",
        ThumbnailAttachment="attachments_thumbnail",
        DisplayAttachment="attachments_display",
        PosterAttachment="attachments_poster",
        WebAttachment="attachments_web",
        DiscardAttachment="attachments_discard",
    ),
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
            if prop.get("nullable") and isinstance(refs, list) and len(refs) == 1 and "$ref" in refs[0]:
                target = schemas.get(refs[0]["$ref"].rsplit("/", 1)[1])
                if target is not None:
                    inlined = {k: v for k, v in prop.items() if k != "allOf"}
                    component["properties"][name] = {**target, **inlined}


def postprocess(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular hook: the plain Django upload view, security schemes, profile enums, links."""
    paths = result.setdefault("paths", {})
    paths.setdefault("/api/v1/uploads/{attachment_id}/content", {})["put"] = UPLOAD_CONTENT_OPERATION
    components = result.setdefault("components", {})
    components.setdefault("securitySchemes", {}).update(SECURITY_SCHEMES)
    _profile_enums(components.setdefault("schemas", {}))
    _inline_nullable_refs(components["schemas"])
    # `serve` refuses a request line (method, path and query) over 4,094 bytes before any view runs.
    for operations in paths.values():
        for operation in operations.values():
            operation.setdefault("responses", {}).setdefault("414", _REQUEST_LINE_TOO_LONG)
    for (path, method, status), links in LINKS.items():
        response = paths.get(path, {}).get(method, {}).get("responses", {}).get(status)
        if response is not None:
            response["links"] = links
    result["paths"] = dict(sorted(paths.items()))
    return result
