"""Client tokens for a host's people's devices: mint, revoke one, log a subject out.

Service tokens only (no `client_token_allowed`: a client token gets
`403 CLIENT_TOKEN_SCOPE`, scope.py).
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from ..api.schema import JSON_TOO_LARGE, errors
from ..api.serializers import SharedSerializer, StrictCharField, StrictIntegerField, UtcDateTimeField
from ..errors import NotAuthenticated, NotFound, OutOfScope, TooLarge, ValidationFailed
from ..subjects import MAX_LENGTH as SUBJECT_MAX_LENGTH
from .services.client_tokens import (
    MAX_REF_LENGTH,
    MAX_TTL_SECONDS,
    client_token_issue,
    client_token_revoke,
    subject_logout,
)

_TAGS = ["client tokens"]


def _subject_field():
    return StrictCharField(
        max_length=SUBJECT_MAX_LENGTH,
        trim_whitespace=False,
        help_text="The host's id for the person: 1–128 printable ASCII characters.",
    )


class ClientTokenCreateApi(APIView):
    @extend_schema_serializer(component_name="ClientTokenCreate")
    class InputSerializer(SharedSerializer):
        subject = _subject_field()
        ttl_seconds = StrictIntegerField(min_value=1, max_value=MAX_TTL_SECONDS)
        profiles = serializers.ListField(
            child=StrictCharField(max_length=64),
            min_length=1,
            required=False,
            help_text="The profiles it may upload to; omit for every profile.",
        )
        ref = StrictCharField(
            max_length=MAX_REF_LENGTH, required=False, help_text="The one ref it may commit to; omit: no commit."
        )
        max_files = StrictIntegerField(min_value=1, max_value=2**62, required=False, help_text="Uploads it may create.")
        max_bytes = StrictIntegerField(
            min_value=1, max_value=2**62, required=False, help_text="Declared bytes it may upload, in all."
        )

    @extend_schema_serializer(component_name="ClientToken")
    class OutputSerializer(SharedSerializer):
        id = serializers.UUIDField(help_text="For DELETE /client-tokens/{id}.")
        token = serializers.CharField(help_text="`act_…`: shown once, stored only as a digest.")
        subject = serializers.CharField()
        expires_at = UtcDateTimeField()

    @extend_schema(
        operation_id="client_tokens_create",
        tags=_TAGS,
        summary="Mint a client token for one of your people's devices",
        description="Service tokens only. The token acts for `subject` within the grant: intents, uploads, tus, "
        "heartbeat, discard, discard-all, status and downloads of the subject's files, and commit to `ref` "
        "if granted. Send it as `Authorization: Token act_…` or `Bearer act_…`.",
        request=InputSerializer,
        responses={
            201: OpenApiResponse(OutputSerializer, description="The token, shown once."),
            **errors(ValidationFailed, NotAuthenticated, OutOfScope, TooLarge, TOO_LARGE=JSON_TOO_LARGE),
        },
    )
    def post(self, request):
        data = self.InputSerializer.validate_body(request.data)
        issued = client_token_issue(
            user=request.user,
            subject=data["subject"],
            ttl_seconds=data["ttl_seconds"],
            profiles=data.get("profiles"),
            ref=data.get("ref"),
            max_files=data.get("max_files"),
            max_bytes=data.get("max_bytes"),
        )
        token = issued.token
        return Response(
            self.OutputSerializer.render(
                {"id": token.pk, "token": issued.key, "subject": token.subject, "expires_at": token.expires_at}
            ),
            status=201,
        )


class ClientTokenApi(APIView):
    @extend_schema(
        operation_id="client_tokens_destroy",
        tags=_TAGS,
        summary="Revoke a client token",
        description="Idempotent. From now on the token is `401`. Your tenant's tokens only.",
        parameters=[
            OpenApiParameter("token_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The token's id.")
        ],
        request=None,
        responses={204: OpenApiResponse(description="Revoked."), **errors(NotAuthenticated, OutOfScope, NotFound)},
    )
    def delete(self, request, token_id):
        client_token_revoke(user=request.user, token_id=token_id)
        return Response(status=204)


class SubjectLogoutApi(APIView):
    @extend_schema_serializer(component_name="SubjectLogout")
    class InputSerializer(SharedSerializer):
        subject = _subject_field()

    @extend_schema_serializer(component_name="SubjectLogoutResponse")
    class OutputSerializer(SharedSerializer):
        revoked = serializers.IntegerField(min_value=0, help_text="Live client tokens revoked.")
        discarded = serializers.IntegerField(min_value=0, help_text="Staged uploads discarded (held drafts stay).")

    @extend_schema(
        operation_id="subjects_logout",
        tags=_TAGS,
        summary="Log one of your people out",
        description="Service tokens only. Revokes every client token of the subject and discards the subject's "
        "staged, uncommitted uploads (as discard-all acting for it). Committed files stay.",
        request=InputSerializer,
        responses={
            200: OpenApiResponse(OutputSerializer, description="What was revoked and discarded."),
            **errors(ValidationFailed, NotAuthenticated, OutOfScope, TooLarge, TOO_LARGE=JSON_TOO_LARGE),
        },
    )
    def post(self, request):
        data = self.InputSerializer.validate_body(request.data)
        done = subject_logout(user=request.user, subject=data["subject"])
        return Response(self.OutputSerializer.render({"revoked": done.revoked, "discarded": done.discarded}))
