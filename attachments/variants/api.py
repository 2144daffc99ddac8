"""GET /attachments/{id}/variants/{name}: a named variant, made on first request (docs/api.md, "Variants")."""

from __future__ import annotations

from django.http import HttpResponse
from django.utils.cache import patch_vary_headers
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.negotiation import DefaultContentNegotiation

from ..api.delivery import SIGNED_LINK_PARAMETERS, readable_attachment
from ..api.schema import ATTACHMENT_ID, errors, file_responses
from ..api.views import FileApi
from ..errors import NotAuthenticated, NotFound, NotReady, SignatureInvalid, UrlExpired, ValidationFailed
from ..serving import derivative_response, stem
from .services.obtain import VariantBusy, VariantFailed, variant_obtain
from .spec import FORMATS, etag_matches, negotiated_format, signed_name, variant_etag, variant_sizes

VARIANT_NAME = OpenApiParameter(
    "name",
    OpenApiTypes.STR,
    OpenApiParameter.PATH,
    description="A variant of the file's profile (AIRLOCK_VARIANTS), e.g. `medium`.",
)


def _cache_headers(response, etag: str):
    # The format depends on Accept. No-store like every file read: a takedown must take
    # effect at the next view, not when a browser's copy expires; the ETag still spares
    # the bytes to a client that keeps its own copy and revalidates.
    patch_vary_headers(response, ["Accept"])
    if response.status_code in (200, 206, 304):
        response["ETag"] = etag
    response["Cache-Control"] = "private, no-store"
    return response


class _AcceptPicksTheImageFormat(DefaultContentNegotiation):
    """`Accept` chooses the variant's format, not the renderer: errors are JSON whatever it lists."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class AttachmentVariantApi(FileApi):
    content_negotiation_class = _AcceptPicksTheImageFormat

    @extend_schema(
        operation_id="attachments_variant",
        tags=["attachments"],
        summary="Get a named variant (WebP, or JPEG without image/webp in Accept; gated; made on first request)",
        parameters=[ATTACHMENT_ID, VARIANT_NAME, *SIGNED_LINK_PARAMETERS],
        responses={
            **file_responses("image/webp"),
            304: OpenApiResponse(description="`If-None-Match` names the current `ETag`."),
            **errors(
                ValidationFailed,
                NotAuthenticated,
                SignatureInvalid,
                UrlExpired,
                NotFound,
                NotReady,
                VariantFailed,
                VariantBusy,
                NOT_READY="the owner's file is still `pending` or `processing` (`details.status`)",
                VALIDATION_ERROR="a query parameter the operation does not take (named in `details`)",
            ),
        },
    )
    def get(self, request, attachment_id, name):
        attachment = readable_attachment(request, attachment_id=attachment_id, name=signed_name(name))
        # readable_attachment let only a ready file through: the profile decides which variants it has.
        if name not in variant_sizes(attachment.profile, attachment.content_type):
            raise NotFound()
        fmt = negotiated_format(request.headers.get("Accept", ""))
        etag = variant_etag(sha256=attachment.sha256, name=name, fmt=fmt)
        if etag_matches(request.headers.get("If-None-Match", ""), etag):
            return _cache_headers(HttpResponse(status=304), etag)
        variant = variant_obtain(attachment=attachment, name=name, fmt=fmt)
        filename = f"{stem(attachment.filename, 'variant')}-{name}.{FORMATS[fmt][1]}"
        response = derivative_response(request, variant, filename=filename)
        return _cache_headers(response, etag)
