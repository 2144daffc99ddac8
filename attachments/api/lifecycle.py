"""The upload-first lifecycle: heartbeat, discard, discard-all, commit; and its end: release, delete, restore."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from ..errors import (
    AlreadyCommitted,
    AttachmentInvalid,
    NotAuthenticated,
    NotFound,
    NotRestorable,
    OutOfScope,
    TooLarge,
    ValidationFailed,
)
from ..retention.services.release import MAX_IDS, attachment_delete, attachment_restore, attachments_release
from ..services.lifecycle import (
    attachment_discard,
    attachments_commit,
    attachments_discard_all,
    attachments_heartbeat,
)
from . import views
from .schema import ATTACHMENT_ID, JSON_TOO_LARGE, errors
from .serializers import SharedSerializer, StrictCharField, UtcDateTimeField

_TAGS = ["lifecycle"]


def _ids(*, required: bool = True):
    # allow_empty keeps DRF's "may not be empty" message; min_length is what the schema shows.
    return serializers.ListField(
        child=StrictCharField(max_length=64, allow_blank=True),
        max_length=MAX_IDS,
        min_length=1,
        allow_empty=False,
        required=required,
    )


@extend_schema_serializer(component_name="HeartbeatEntry")
class HeartbeatEntrySerializer(SharedSerializer):
    id = serializers.CharField()
    expires_at = UtcDateTimeField(allow_null=True, help_text="Null for committed attachments.")


class HeartbeatApi(APIView):
    client_token_allowed = True

    @extend_schema_serializer(component_name="Heartbeat")
    class InputSerializer(SharedSerializer):
        ids = _ids()

    @extend_schema_serializer(component_name="HeartbeatResponse")
    class OutputSerializer(SharedSerializer):
        attachments = HeartbeatEntrySerializer(many=True)
        missing = serializers.ListField(
            child=serializers.CharField(), help_text="Unknown, not yours, discarded or expired (no distinction)."
        )

    @extend_schema(
        operation_id="attachments_heartbeat",
        tags=_TAGS,
        summary="Keep staged attachments alive",
        request=InputSerializer,
        responses={
            200: OpenApiResponse(OutputSerializer, description="New expiries, and the ids that are gone."),
            **errors(ValidationFailed, NotAuthenticated, TooLarge, TOO_LARGE=JSON_TOO_LARGE),
        },
    )
    def post(self, request):
        data = self.InputSerializer.validate_body(request.data)
        result = attachments_heartbeat(user=request.user, ids=data["ids"])
        return Response(
            self.OutputSerializer.render(
                {
                    "attachments": [{"id": pk, "expires_at": expires_at} for pk, expires_at in result.attachments],
                    "missing": result.missing,
                }
            )
        )


class DiscardApi(APIView):
    client_token_allowed = True

    @extend_schema(
        operation_id="attachments_discard",
        tags=_TAGS,
        summary="Discard one attachment",
        description="Idempotent; the sweeper reaps it on its next tick.",
        parameters=[ATTACHMENT_ID],
        request=None,
        responses={
            204: OpenApiResponse(description="Discarded."),
            **errors(NotAuthenticated, NotFound, AlreadyCommitted),
        },
    )
    def post(self, request, attachment_id):
        attachment_discard(user=request.user, attachment_id=attachment_id)
        return Response(status=204)


class DiscardAllApi(APIView):
    client_token_allowed = True

    @extend_schema_serializer(component_name="DiscardAllResponse")
    class OutputSerializer(SharedSerializer):
        discarded = serializers.IntegerField(min_value=0)

    @extend_schema(
        operation_id="attachments_discard_all",
        tags=_TAGS,
        summary="Discard every staged, uncommitted attachment of yours",
        request=None,
        responses={
            200: OpenApiResponse(OutputSerializer, description="How many were discarded."),
            **errors(NotAuthenticated),
        },
    )
    def post(self, request):
        return Response(self.OutputSerializer.render({"discarded": attachments_discard_all(user=request.user)}))


class CommitApi(APIView):
    client_token_allowed = True  # to the granted ref only (client_tokens/services/client_grants.py)

    @extend_schema_serializer(component_name="Commit")
    class InputSerializer(SharedSerializer):
        ids = _ids()
        ref = StrictCharField(max_length=200)
        replace = serializers.BooleanField(
            default=False, help_text="Make `ids` the ref's whole set: your other files committed to it are released."
        )

    @extend_schema_serializer(component_name="CommitResponse")
    class OutputSerializer(SharedSerializer):
        committed = serializers.ListField(child=serializers.CharField())
        ref = serializers.CharField()

    @extend_schema(
        operation_id="attachments_commit",
        tags=_TAGS,
        summary="Commit attachments to a reference",
        description="All or nothing. Re-committing to the same ref is a no-op. With `replace`, the ids become the "
        "ref's whole set and your other files committed to it are released in the same transaction. "
        "`ATTACHMENT_INVALID` details map each bad id to not_found, expired, discarded, released, "
        "already_committed, rejected, failed or pending_approval (a guest's file that waits for approval).",
        request=InputSerializer,
        responses={
            200: OpenApiResponse(OutputSerializer, description="All committed."),
            **errors(
                ValidationFailed,
                NotAuthenticated,
                OutOfScope,
                TooLarge,
                AttachmentInvalid,
                TOO_LARGE=JSON_TOO_LARGE,
                CLIENT_TOKEN_SCOPE="a client token committing to another ref than its granted one, or with `replace`",
            ),
        },
    )
    def post(self, request):
        data = self.InputSerializer.validate_body(request.data)
        committed = attachments_commit(owner=request.user, ids=data["ids"], ref=data["ref"], replace=data["replace"])
        return Response(self.OutputSerializer.render({"committed": committed, "ref": data["ref"]}))


class ReleaseApi(APIView):
    @extend_schema_serializer(component_name="Release")
    class InputSerializer(SharedSerializer):
        ref = StrictCharField(max_length=200, required=False, help_text="Release every file committed to it.")
        ids = _ids(required=False)

        def validate(self, attrs):
            if ("ref" in attrs) == ("ids" in attrs):
                raise serializers.ValidationError("Give exactly one of ref and ids.")
            return attrs

    @extend_schema_serializer(component_name="ReleaseResponse")
    class OutputSerializer(SharedSerializer):
        released = serializers.ListField(
            child=serializers.CharField(), help_text="Every file now released, including those released before."
        )

    @extend_schema(
        operation_id="attachments_release",
        tags=_TAGS,
        summary="Release committed attachments",
        description="By `ref` (every file committed to it) or by `ids` (all or nothing; `ATTACHMENT_INVALID` "
        "details map each bad id to not_found or not_committed). Released files are no longer served and are "
        "removed by the sweeper after the grace (`expires_at`); until then `restore` brings one back. Idempotent.",
        request=InputSerializer,
        responses={
            200: OpenApiResponse(OutputSerializer, description="Released."),
            **errors(ValidationFailed, NotAuthenticated, TooLarge, AttachmentInvalid, TOO_LARGE=JSON_TOO_LARGE),
        },
    )
    def post(self, request):
        data = self.InputSerializer.validate_body(request.data)
        released = attachments_release(user=request.user, ref=data.get("ref"), ids=data.get("ids"))
        return Response(self.OutputSerializer.render({"released": released}))


class RestoreApi(APIView):
    @extend_schema(
        operation_id="attachments_restore",
        tags=_TAGS,
        summary="Restore a released attachment",
        description="Within the grace (`expires_at`): committed again to its ref. Restoring a committed file is a "
        "no-op; any other lifecycle, or a grace that is over, is `NOT_RESTORABLE`.",
        parameters=[ATTACHMENT_ID],
        request=None,
        responses={
            204: OpenApiResponse(description="Committed again."),
            **errors(NotAuthenticated, NotFound, NotRestorable),
        },
    )
    def post(self, request, attachment_id):
        attachment_restore(user=request.user, attachment_id=attachment_id)
        return Response(status=204)


class AttachmentApi(views.AttachmentDetailApi):
    @extend_schema(
        operation_id="attachments_destroy",
        tags=_TAGS,
        summary="Delete one attachment",
        description="A staged file is discarded (as `discard`); a committed one is released (as `release`, "
        "restorable within the grace). Idempotent.",
        parameters=[ATTACHMENT_ID],
        request=None,
        responses={204: OpenApiResponse(description="Discarded or released."), **errors(NotAuthenticated, NotFound)},
    )
    def delete(self, request, attachment_id):
        attachment_delete(user=request.user, attachment_id=attachment_id)
        return Response(status=204)
