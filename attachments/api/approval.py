"""Approve or decline guests' files sent through a link that requires approval (attachments/services/approval.py).

The files' owner (the link's service account) or a moderator of their tenant;
not client tokens (closed by the default allowlist): a guest never decides.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from ..errors import NotAuthenticated, OutOfScope, TooLarge, ValidationFailed
from ..services.approval import attachments_approve, attachments_decline
from .lifecycle import _ids
from .schema import JSON_TOO_LARGE, errors
from .serializers import SharedSerializer, StrictCharField

_TAGS = ["upload links"]


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
