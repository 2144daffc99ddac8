"""GET /api/v1/usage: what the caller's tenant holds against its quotas."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from ..errors import NotAuthenticated
from ..services.quotas import tenant_usage
from ..tenancy import tenant_of
from .query import DeclaredQuery
from .schema import errors
from .serializers import SharedSerializer


class UsageApi(DeclaredQuery, APIView):
    @extend_schema_serializer(component_name="Usage")
    class OutputSerializer(SharedSerializer):
        bytes_used = serializers.IntegerField(
            help_text="Declared sizes of pending uploads plus stored sizes of every other file not rejected, "
            "failed, discarded or deleted."
        )
        bytes_limit = serializers.IntegerField(allow_null=True, help_text="null: unlimited.")
        files_used = serializers.IntegerField(help_text="Files counted in bytes_used.")
        files_limit = serializers.IntegerField(allow_null=True, help_text="null: unlimited.")

    @extend_schema(
        operation_id="usage_retrieve",
        tags=["usage"],
        summary="The caller's tenant usage and quotas",
        responses={
            200: OpenApiResponse(OutputSerializer, description="Usage and limits of the caller's tenant."),
            **errors(NotAuthenticated),
        },
    )
    def get(self, request):
        usage = tenant_usage(tenant=tenant_of(request.user))
        return Response(self.OutputSerializer.render(usage))
