"""POST /api/v1/storage-events: S3-compatible event notifications (MinIO webhook, relays)."""

from __future__ import annotations

import hmac
import json

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework.response import Response
from rest_framework.views import APIView

from ..errors import NotAuthenticated, TooLarge, ValidationFailed
from ..services.storage_events import MalformedEvent, parse_storage_events, storage_events_record


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

    def post(self, request):
        if not _bearer_ok(request.META.get("HTTP_AUTHORIZATION", "")):
            raise NotAuthenticated("A valid storage-events bearer token is required.",
                                   headers={"WWW-Authenticate": 'Bearer realm="storage-events"'})
        try:
            body = request.body  # any content type: relays send text/plain as often as JSON
        except RequestDataTooBig:
            raise TooLarge("The event document is too large.") from None
        try:
            payload = json.loads(body)
            parsed = parse_storage_events(payload)
        except (ValueError, RecursionError, MalformedEvent) as exc:  # JSONDecodeError, bad UTF-8; deep nesting
            raise ValidationFailed("The body is not an S3 event document.",
                                   details={"non_field_errors": [str(exc)[:200]]}) from None
        report = storage_events_record(parsed=parsed, source="webhook")
        return Response({"accepted": report.accepted}, status=202)
