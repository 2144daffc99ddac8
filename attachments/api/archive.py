"""A ref's files as one ZIP (`GET /refs/{ref}/archive`), and a signed link to it for an `<a download>`.

The caller's own credential reads the ref's files it may see (the tenant's, or its
subject's when confined); a signed link stands for that same read until it expires,
and the gate (ready, committed to the ref) is checked again when it is used.
"""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import quote

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from ..archive import archive_stream, members_of
from ..client_tokens.scope import ClientTokenScope
from ..errors import NotAuthenticated, NotFound, OutOfScope, SignatureInvalid, UrlExpired, ValidationFailed
from ..renditions import WEB
from ..selectors import ref_archive_files, ref_archive_files_signed, ref_web_renditions
from ..services.audit import ref_archive_record
from ..services.transitions import user_actor
from ..serving import content_disposition, security_headers
from ..signing import archive_query, delivery_expiry, delivery_signed
from .delivery import SIGNED_LINK_NAMES, SIGNED_LINK_PARAMETERS, SignedOrAuthenticated
from .links import absolute_url
from .query import DeclaredQuery
from .schema import errors
from .serializers import SharedSerializer

_TAGS = ["refs"]
REF = OpenApiParameter("ref", OpenApiTypes.STR, OpenApiParameter.PATH, description="The reference (URL-encoded).")
RENDITIONS = OpenApiParameter(
    "renditions",
    {"type": "string", "enum": ["web"]},
    OpenApiParameter.QUERY,
    description="`web`: each video whose `renditions.web.status` is `ready` goes in as its web rendition "
    "(what `web` serves, named `<download name stem>.mp4`); every other file as `download` serves it. "
    "Without it, every member is what `download` serves.",
)
LINK_RENDITIONS = OpenApiParameter(
    "renditions",
    {"type": "string", "enum": ["web"]},
    OpenApiParameter.QUERY,
    description="`web`: the link carries `renditions=web`, so its archive takes each video's ready web "
    "rendition (see `refs_archive`).",
)
WEB_ONLY = "Only `web` is accepted."
ARCHIVE_LINK_PARAMETERS = [
    OpenApiParameter("t", OpenApiTypes.STR, OpenApiParameter.QUERY, description="Signed link: the tenant's slug."),
    OpenApiParameter(
        "scope", OpenApiTypes.STR, OpenApiParameter.QUERY, description="Signed link: the subject it was minted for."
    ),
    *SIGNED_LINK_PARAMETERS,
]


def archive_path(ref: str) -> str:
    return f"/api/v1/refs/{quote(ref, safe='')}/archive"


def _signed_in(request) -> bool:
    return request.user is not None and request.user.is_authenticated


def _renditions(query) -> str:
    """The `renditions` asked for: "" (none) or "web"; any other value is 400 VALIDATION_ERROR."""
    if "renditions" not in query:
        return ""
    if query.getlist("renditions") != [WEB]:
        raise ValidationFailed("`renditions` takes one value: web.", details={"renditions": [WEB_ONLY]})
    return WEB


class RefArchiveApi(DeclaredQuery, APIView):
    # A client token acts for one person's uploads; an album is the host's to hand out (a signed link).
    permission_classes = [SignedOrAuthenticated, ClientTokenScope]
    query_parameters = frozenset({"renditions", "t", "scope", *SIGNED_LINK_NAMES})

    @extend_schema(
        operation_id="refs_archive",
        tags=_TAGS,
        summary="Download every available file of a ref as one ZIP (streamed)",
        description="Ready files committed to the ref, each as `download` serves it (location-free), under its "
        "download name made unique; stored (not deflated), ZIP64 past 4 GiB, `Content-Length` known in advance.",
        parameters=[REF, RENDITIONS, *ARCHIVE_LINK_PARAMETERS],
        responses={
            (200, "application/zip"): OpenApiResponse(OpenApiTypes.BINARY, description="The ZIP, streamed."),
            **errors(
                ValidationFailed,
                NotAuthenticated,
                SignatureInvalid,
                UrlExpired,
                OutOfScope,
                NotFound,
                NOT_FOUND="the ref has no available file",
                VALIDATION_ERROR="a query parameter the operation does not take, or `renditions` other than "
                "`web` (named in `details`)",
            ),
        },
    )
    def get(self, request, ref):
        query = request.query_params
        wanted = _renditions(query)
        if _signed_in(request) and not delivery_signed(query):
            tenant, scope, files = ref_archive_files(user=request.user, ref=ref)
            actor = user_actor(request.user)
        else:
            tenant, scope, files = ref_archive_files_signed(
                tenant_slug=query.get("t"),
                ref=ref,
                scope=query.get("scope"),
                exp=query.get("exp"),
                kid=query.get("kid"),
                sig=query.get("sig"),
            )
            actor = "signed-link"
        web = ref_web_renditions(tenant_id=tenant.pk, ref=ref, scope=scope) if wanted == WEB else None
        members = members_of(files, web)
        stream = archive_stream(members)
        size = len(stream)
        archive_id = ref_archive_record(attachments=files, ref=ref, actor=actor, size=size, renditions=wanted)
        response = StreamingHttpResponse(iter(stream), content_type="application/zip")
        response["Content-Length"] = str(size)
        response["Content-Disposition"] = content_disposition("attachment", f"{_zip_name(ref)}.zip")
        response["X-Archive-Id"] = archive_id
        return security_headers(response)


def _zip_name(ref: str) -> str:
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in ref).strip("._")
    return name[:100] or "archive"


class RefArchiveLinkApi(DeclaredQuery, APIView):
    permission_classes = [IsAuthenticated, ClientTokenScope]
    query_parameters = frozenset({"renditions"})

    @extend_schema_serializer(component_name="ArchiveLink")
    class OutputSerializer(SharedSerializer):
        url = serializers.URLField(
            help_text="The archive, signed: works without `Authorization` until `expires_at`; it carries "
            "`renditions=web` when asked for."
        )
        expires_at = serializers.DateTimeField()

    @extend_schema(
        operation_id="refs_archive_link",
        tags=_TAGS,
        summary="A signed link to the ref's archive, for an `<a download>`",
        parameters=[REF, LINK_RENDITIONS],
        responses={
            200: OutputSerializer,
            **errors(
                ValidationFailed,
                NotAuthenticated,
                OutOfScope,
                NotFound,
                NOT_FOUND="the ref has no available file",
                VALIDATION_ERROR="a query parameter the operation does not take, or `renditions` other than "
                "`web` (named in `details`)",
            ),
        },
    )
    def get(self, request, ref):
        wanted = _renditions(request.query_params)
        tenant, scope, _files = ref_archive_files(user=request.user, ref=ref)  # 404: nothing to take
        exp = delivery_expiry()
        signed = archive_query(tenant_id=tenant.pk, tenant_slug=tenant.slug, ref=ref, scope=scope, exp=exp)
        # Not signed: it picks the form of the same files, each readable under the link either way.
        choice = f"renditions={wanted}&" if wanted else ""
        url = absolute_url(request, f"{archive_path(ref)}?{choice}{signed}")
        return Response(self.OutputSerializer.render({"url": url, "expires_at": datetime.fromtimestamp(exp, UTC)}))
