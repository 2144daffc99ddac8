"""POST /api/v1/subjects/erase: erasing one of a host's people (every file of it in the caller's tenant)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from ..api.schema import JSON_TOO_LARGE, errors
from ..api.serializers import SharedSerializer, StrictCharField
from ..errors import NotAuthenticated, NotFound, OutOfScope, TooLarge, ValidationFailed
from .services.erasure import subject_erase

_TAGS = ["subjects"]


class SubjectEraseApi(APIView):
    @extend_schema_serializer(component_name="SubjectErase")
    class InputSerializer(SharedSerializer):
        subject = StrictCharField(
            max_length=128, trim_whitespace=False, help_text="The subject id, as sent in `Airlock-Subject`."
        )
        dry_run = serializers.BooleanField(default=False, help_text="Report what would be erased; change nothing.")

    @extend_schema_serializer(component_name="SubjectErasure")
    class OutputSerializer(SharedSerializer):
        subject = serializers.CharField()
        dry_run = serializers.BooleanField()
        files = serializers.IntegerField(min_value=0, help_text="Files let go (that would be, in a dry run).")
        by_lifecycle = serializers.DictField(
            child=serializers.IntegerField(min_value=0), help_text="Those files by lifecycle before the erasure."
        )
        objects = serializers.IntegerField(min_value=0, help_text="Stored objects of those files.")
        bytes = serializers.IntegerField(min_value=0)
        held_skipped = serializers.ListField(
            child=serializers.CharField(), help_text="Ids of files under a legal hold, left as they are."
        )
        tokens_revoked = serializers.IntegerField(
            min_value=0,
            help_text="Live client tokens of the subject (neither revoked nor expired) revoked "
            "(that would be, in a dry run).",
        )

    @extend_schema(
        operation_id="subjects_erase",
        tags=_TAGS,
        summary="Erase every file of one of your people",
        description="Every file of the subject in your tenant, whichever token made it, is let go now (no release "
        "grace) and its objects are removed by the sweeper's next run; files under a legal hold stay and are listed. "
        "The subject's client tokens are revoked. Service tokens only.",
        request=InputSerializer,
        responses={
            200: OpenApiResponse(OutputSerializer, description="What was (or, with `dry_run`, would be) erased."),
            **errors(ValidationFailed, NotAuthenticated, OutOfScope, NotFound, TooLarge, TOO_LARGE=JSON_TOO_LARGE),
        },
    )
    def post(self, request):
        data = self.InputSerializer.validate_body(request.data)
        plan = subject_erase(user=request.user, subject=data["subject"], dry_run=data["dry_run"])
        return Response(
            self.OutputSerializer.render(
                {
                    "subject": data["subject"],
                    "dry_run": data["dry_run"],
                    "files": plan.files,
                    "by_lifecycle": plan.by_lifecycle,
                    "objects": plan.objects,
                    "bytes": plan.bytes,
                    "held_skipped": plan.held,
                    "tokens_revoked": plan.tokens,
                }
            )
        )
