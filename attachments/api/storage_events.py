"""POST /api/v1/storage-events: storage notifications (S3 event documents, R2 notifications; webhooks, relays)."""

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
from ..services.storage_event_formats import MalformedEvent, parse_storage_events
from ..services.storage_events import storage_events_record
from .schema import errors
from .serializers import SharedSerializer

_R2_NOTIFICATION = {
    "type": "object",
    "description": "A Cloudflare R2 event notification (one queue message's body).",
    "required": ["action", "bucket", "object"],
    "properties": {
        "account": {"type": "string"},
        "action": {
            "type": "string",
            "description": "PutObject, CopyObject, CompleteMultipartUpload, DeleteObject or LifecycleDeletion; "
            "any other action is counted as unknown.",
        },
        "bucket": {"type": "string"},
        "object": {
            "type": "object",
            "properties": {"key": {"type": "string"}, "size": {"type": "integer"}, "eTag": {"type": "string"}},
            "required": ["key"],
        },
        "eventTime": {"type": "string", "format": "date-time"},
        "copySource": {
            "type": "object",
            "properties": {"bucket": {"type": "string"}, "object": {"type": "string"}},
        },
    },
    "additionalProperties": True,
}
_STORAGE_EVENTS = {
    "oneOf": [
        {
            "type": "object",
            "description": "An S3 event document (S3/SQS, SNS envelope, MinIO webhook) or S3's test event.",
            "properties": {"Records": {"type": "array", "items": {"type": "object", "additionalProperties": True}}},
            "additionalProperties": True,
        },
        _R2_NOTIFICATION,
        {
            "type": "array",
            "description": "A batch of R2 notifications (a relay's queue batch).",
            "items": _R2_NOTIFICATION,
        },
    ]
}


@extend_schema_serializer(component_name="StorageEventResult")
class StorageEventResultSerializer(SharedSerializer):
    index = serializers.IntegerField(min_value=0, help_text="The record's position: in Records, or in the batch.")
    outcome = serializers.CharField(
        help_text="What became of it: started, ignored, duplicate, unknown_key, absent, object_missing, … "
        "or unknown (an action this service does not know), malformed, skipped, error."
    )
    retry = serializers.BooleanField(
        help_text="True when the record could not be applied now (storage or database failing): deliver "
        "it again. A relay acks every other record."
    )


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
    """S3 event JSON with `Records`, or R2 notifications; 202 with what became of each record."""

    # Not a user endpoint: the shared bearer token is the only credential.
    authentication_classes: list = []
    permission_classes: list = []

    @extend_schema_serializer(component_name="StorageEventsAccepted")
    class OutputSerializer(SharedSerializer):
        accepted = serializers.IntegerField(min_value=0, help_text="Records handled (duplicates included).")
        unknown = serializers.IntegerField(min_value=0, help_text="Records of an action this service does not know.")
        results = StorageEventResultSerializer(many=True, help_text="One entry per record, in document order.")

    @extend_schema(
        operation_id="storage_events_create",
        tags=["storage"],
        summary="Receive storage events (S3 event documents, R2 notifications)",
        description="At-least-once, possibly out of order; duplicates are harmless. Objects at keys the service "
        "never issued are deleted, never processed. A body that is neither an S3 event document nor R2 "
        "notification(s) is 400. The answer speaks per record, so a relay can ack or retry each message.",
        # A security requirement object, as the schema needs it (drf-spectacular's hint says str).
        auth=[{"storageEventsBearer": []}],  # type: ignore[list-item]
        request={"application/json": _STORAGE_EVENTS},
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
                "The body is neither an S3 event document nor an R2 event notification.",
                details={"non_field_errors": [str(exc)[:200]]},
            ) from None
        report = storage_events_record(parsed=parsed, source="webhook", isolate_failures=True)
        return Response(self.OutputSerializer.render(report), status=202)
