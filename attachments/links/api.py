"""Upload links: make, list, show, disable (service tokens; a client token is refused by the default allowlist),
a guest's removal of its own file (the link page's client token only), and the host's approve or decline of
guests' files sent through a link that requires approval (services/approval.py).

Approving and declining: the files' owner (the link's service account) or a moderator of their tenant;
not client tokens (closed by the default allowlist): a guest never decides.
"""

from __future__ import annotations

from django.urls import reverse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from ..api.lifecycle import _ids
from ..api.links import absolute_url
from ..api.query import DeclaredQuery
from ..api.schema import ATTACHMENT_ID, JSON_TOO_LARGE, errors
from ..api.serializers import SharedSerializer, StrictCharField, StrictIntegerField, UtcDateTimeField
from ..errors import AlreadyCommitted, NotAuthenticated, NotFound, OutOfScope, TooLarge, ValidationFailed
from ..models import UploadLink
from .services.approval import attachments_approve, attachments_decline
from .services.upload_links import (
    MAX_REF_LENGTH,
    MAX_TITLE_LENGTH,
    link_guest_remove,
    link_profiles,
    link_state,
    upload_link_create,
    upload_link_disable,
    upload_link_get,
    upload_links_of,
)

_TAGS = ["upload links"]
LINK_ID = OpenApiParameter("link_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The link's id.")


@extend_schema_serializer(component_name="UploadLink")
class UploadLinkSerializer(SharedSerializer):
    id = serializers.UUIDField()
    url = serializers.CharField(help_text="The guests' page: what the QR code encodes.")
    qr_svg_url = serializers.CharField(help_text="The QR code as SVG (public: it holds only `url`).")
    qr_png_url = serializers.CharField(help_text="The QR code as PNG (public).")
    ref = serializers.CharField()
    title = serializers.CharField()
    profiles = serializers.ListField(child=serializers.CharField(), help_text="The profiles guests upload to.")
    requires_approval = serializers.BooleanField()
    max_files_per_guest = serializers.IntegerField(allow_null=True)
    max_bytes_per_guest = serializers.IntegerField(allow_null=True)
    max_files = serializers.IntegerField(allow_null=True)
    files_used = serializers.IntegerField(help_text="Files guests have sent through it (removed ones not counted).")
    state = serializers.ChoiceField(choices=["open", "expired", "disabled"])
    created_at = UtcDateTimeField()
    expires_at = UtcDateTimeField()
    disabled_at = UtcDateTimeField(allow_null=True)


@extend_schema_serializer(component_name="UploadLinkList")
class UploadLinkListSerializer(SharedSerializer):
    results = UploadLinkSerializer(many=True)


def link_resource(request, link: UploadLink, now) -> dict:
    page = reverse("guest-page", kwargs={"link_id": link.pk})
    return {
        "id": link.pk,
        "url": absolute_url(request, page),
        "qr_svg_url": absolute_url(request, reverse("guest-qr-svg", kwargs={"link_id": link.pk})),
        "qr_png_url": absolute_url(request, reverse("guest-qr-png", kwargs={"link_id": link.pk})),
        "ref": link.ref,
        "title": link.title,
        "profiles": link_profiles(link),
        "requires_approval": link.requires_approval,
        "max_files_per_guest": link.max_files_per_guest,
        "max_bytes_per_guest": link.max_bytes_per_guest,
        "max_files": link.max_files,
        "files_used": link.files_used,
        "state": link_state(link, now),
        "created_at": link.created_at,
        "expires_at": link.expires_at,
        "disabled_at": link.disabled_at,
    }


class UploadLinksApi(DeclaredQuery, APIView):
    @extend_schema_serializer(component_name="UploadLinkCreate")
    class InputSerializer(SharedSerializer):
        ref = StrictCharField(max_length=MAX_REF_LENGTH, help_text="Where guests' files are committed.")
        expires_at = UtcDateTimeField(help_text="When the link closes (at most a year ahead).")
        profiles = serializers.ListField(
            child=StrictCharField(max_length=64),
            min_length=1,
            required=False,
            help_text="The profiles guests upload to; omit for photos and videos.",
        )
        title = StrictCharField(max_length=MAX_TITLE_LENGTH, required=False, allow_blank=True)
        max_files_per_guest = StrictIntegerField(min_value=1, max_value=2**62, required=False)
        max_bytes_per_guest = StrictIntegerField(min_value=1, max_value=2**62, required=False)
        max_files = StrictIntegerField(min_value=1, max_value=2**62, required=False, help_text="All guests together.")
        requires_approval = serializers.BooleanField(required=False, default=False)

    @extend_schema(
        operation_id="upload_links_create",
        tags=_TAGS,
        summary="Make an upload link (and its QR code) for guests without an account",
        description="Service tokens only. Each device that opens `url` becomes a guest subject "
        "(`guest:<link>:<device>`) of yours; its files are committed to `ref` once ready, or wait for "
        "`POST /attachments/approve` when `requires_approval`.",
        request=InputSerializer,
        responses={
            201: OpenApiResponse(UploadLinkSerializer, description="The link."),
            **errors(ValidationFailed, NotAuthenticated, OutOfScope, TooLarge, TOO_LARGE=JSON_TOO_LARGE),
        },
    )
    def post(self, request):
        data = self.InputSerializer.validate_body(request.data)
        link = upload_link_create(user=request.user, **data)
        return Response(UploadLinkSerializer.render(link_resource(request, link, timezone.now())), status=201)

    @extend_schema(
        operation_id="upload_links_list",
        tags=_TAGS,
        summary="Your tenant's upload links, newest first",
        responses={200: UploadLinkListSerializer, **errors(NotAuthenticated, OutOfScope)},
    )
    def get(self, request):
        now = timezone.now()
        links = [link_resource(request, link, now) for link in upload_links_of(user=request.user)[:1000]]
        return Response(UploadLinkListSerializer.render({"results": links}))


class UploadLinkApi(DeclaredQuery, APIView):
    @extend_schema(
        operation_id="upload_links_retrieve",
        tags=_TAGS,
        summary="One upload link",
        parameters=[LINK_ID],
        responses={200: UploadLinkSerializer, **errors(NotAuthenticated, OutOfScope, NotFound)},
    )
    def get(self, request, link_id):
        link = upload_link_get(user=request.user, link_id=link_id)
        return Response(UploadLinkSerializer.render(link_resource(request, link, timezone.now())))

    @extend_schema(
        operation_id="upload_links_destroy",
        tags=_TAGS,
        summary="Disable an upload link",
        description="Idempotent and for good: its page says it is closed, its guests' uploads are `410 LINK_GONE`. "
        "Files already sent stay.",
        parameters=[LINK_ID],
        request=None,
        responses={204: OpenApiResponse(description="Disabled."), **errors(NotAuthenticated, OutOfScope, NotFound)},
    )
    def delete(self, request, link_id):
        upload_link_disable(user=request.user, link_id=link_id)
        return Response(status=204)


class GuestUploadApi(APIView):
    client_token_allowed = True  # a link page's guest token; the service refuses any other caller

    @extend_schema(
        operation_id="upload_links_guest_remove",
        tags=_TAGS,
        summary="A guest removes a file it sent through a link",
        description="The link page's token only, its own files only, within `AIRLOCK_GUEST_UNDO_HOURS` of the "
        "upload (later: `409 ALREADY_COMMITTED`). A staged file is discarded, a committed one released; the "
        "sweeper removes it and it no longer counts against the link's limits. Idempotent.",
        parameters=[ATTACHMENT_ID],
        request=None,
        responses={
            204: OpenApiResponse(description="Removed."),
            **errors(NotAuthenticated, NotFound, AlreadyCommitted),
        },
    )
    def delete(self, request, attachment_id):
        link_guest_remove(user=request.user, attachment_id=attachment_id)
        return Response(status=204)


# --- approval ------------------------------------------------------------------------


@extend_schema_serializer(component_name="ApprovalDecision")
class DecisionSerializer(SharedSerializer):
    ref = StrictCharField(max_length=200, required=False, help_text="Every pending file sent for this ref.")
    ids = _ids(required=False)

    def validate(self, attrs):
        if ("ref" in attrs) == ("ids" in attrs):
            raise serializers.ValidationError("Give exactly one of ref and ids.")
        return attrs


@extend_schema_serializer(component_name="ApproveResponse")
class ApprovedSerializer(SharedSerializer):
    approved = serializers.ListField(
        child=serializers.CharField(), help_text="The ids approved by this call (files that were pending)."
    )


@extend_schema_serializer(component_name="DeclineResponse")
class DeclinedSerializer(SharedSerializer):
    declined = serializers.ListField(
        child=serializers.CharField(), help_text="The ids declined by this call (files that were pending)."
    )


_RESPONSES = errors(ValidationFailed, NotAuthenticated, OutOfScope, TooLarge, TOO_LARGE=JSON_TOO_LARGE)


class ApproveApi(APIView):
    @extend_schema(
        operation_id="attachments_approve",
        tags=_TAGS,
        summary="Approve guests' files waiting for approval",
        description="By `ids` or by `ref`. Only files whose `approval` is `pending` change (to `approved`); a ready "
        "one is committed to its link's ref at once, one still processing once it is ready. Audited with the "
        "caller; `attachment.approved` webhooks.",
        request=DecisionSerializer,
        responses={200: OpenApiResponse(ApprovedSerializer, description="The ids approved."), **_RESPONSES},
    )
    def post(self, request):
        data = DecisionSerializer.validate_body(request.data)
        changed = attachments_approve(user=request.user, ids=data.get("ids"), ref=data.get("ref"))
        return Response(ApprovedSerializer.render({"approved": changed}))


class DeclineApi(APIView):
    @extend_schema(
        operation_id="attachments_decline",
        tags=_TAGS,
        summary="Decline guests' files waiting for approval",
        description="By `ids` or by `ref`. Only files whose `approval` is `pending` change (to `declined`); each is "
        "discarded (released if it had been committed) and the sweeper removes it. Audited with the caller; "
        "`attachment.declined` webhooks.",
        request=DecisionSerializer,
        responses={200: OpenApiResponse(DeclinedSerializer, description="The ids declined."), **_RESPONSES},
    )
    def post(self, request):
        data = DecisionSerializer.validate_body(request.data)
        changed = attachments_decline(user=request.user, ids=data.get("ids"), ref=data.get("ref"))
        return Response(DeclinedSerializer.render({"declined": changed}))
