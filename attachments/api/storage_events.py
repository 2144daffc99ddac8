"""POST /api/v1/storage-events: S3-compatible event notifications (MinIO webhook, relays)."""

from __future__ import annotations

import hmac
import json

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from ..errors import NotAuthenticated, TooLarge, ValidationFailed
from ..services.storage_events import MalformedEvent, parse_storage_events, storage_events_record
from .schema import errors
from .serializers import SharedSerializer

_S3_EVENT = {
    "type": "object",
    "description": "An S3 event notification document (S3/SQS, MinIO webhook, R2 relay).",
    "properties": {"Records": {"type": "array", "items": {"type": "object", "additionalProperties": True}}},
    "additionalProperties": True,
}


def _bearer_ok(header: str) -> bool:
    """Constant-time check of `Authorization: Bearer <AIRLOCK_STORAGE_EVENTS_TOKEN>`; unset refuses all."""
    expected = settings.AIRLOCK_STORAGE_EVENTS_TOKEN
    if not expected:
        return False
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return False
    return hmac.compare_digest(token.strip().encode(), str(expected).encode())


class StorageEventsApi(APIView):
    """S3 event JSON with `Records`; 202 with how many records were accepted (duplicates included)."""

    # Not a user endpoint: the shared bearer token is the only credential.
    authentication_classes: list = []
    permission_classes: list = []

    @extend_schema_serializer(component_name="StorageEventsAccepted")
    class OutputSerializer(SharedSerializer):
        accepted = serializers.IntegerField(min_value=0, help_text="Records handled (duplicates included).")

    @extend_schema(
        operation_id="storage_events_create",
        tags=["storage"],
        summary="Receive S3-compatible storage events",
        description="At-least-once, possibly out of order; duplicates are harmless. Objects at keys the service "
        "never issued are deleted, never processed.",
        # A security requirement object, as the schema needs it (drf-spectacular's hint says str).
        auth=[{"storageEventsBearer": []}],  # type: ignore[list-item]
        request={"application/json": _S3_EVENT},
        responses={
            202: OpenApiResponse(OutputSerializer, description="Recorded."),
            **errors(
                ValidationFailed,
                NotAuthenticated,
                TooLarge,
                NOT_AUTHENTICATED="missing or wrong storage-events bearer token",
                TOO_LARGE="the event document is too large",
            ),
        },
    )
    def post(self, request):
        if not _bearer_ok(request.META.get("HTTP_AUTHORIZATION", "")):
            raise NotAuthenticated(
                "A valid storage-events bearer token is required.",
                headers={"WWW-Authenticate": 'Bearer realm="storage-events"'},
            )
        try:
            body = request.body  # any content type: relays send text/plain as often as JSON
        except RequestDataTooBig:
            raise TooLarge("The event document is too large.") from None
        try:
            payload = json.loads(body)
            parsed = parse_storage_events(payload)
        except (ValueError, RecursionError, MalformedEvent) as exc:  # JSONDecodeError, bad UTF-8; deep nesting
            raise ValidationFailed(
                "The body is not an S3 event document.", details={"non_field_errors": [str(exc)[:200]]}
            ) from None
        report = storage_events_record(parsed=parsed, source="webhook")
        return Response(self.OutputSerializer.render(report), status=202)
