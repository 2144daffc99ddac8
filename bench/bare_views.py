"""Baselines for the API benchmark: plain DRF views that do one query each.

They run with the project's DRF defaults (the same token authentication,
IsAuthenticated, JSON parser and renderer), so the comparison isolates what
our endpoints do beyond "authenticate, then one INSERT / one SELECT by primary
key / one SELECT and stream the file". They are not part of the product.
"""

from __future__ import annotations

import os
import uuid

from django.conf import settings
from django.http import FileResponse, Http404
from django.utils import timezone
from rest_framework.response import Response
from rest_framework.views import APIView

from attachments.models import Attachment


class BareInsertApi(APIView):
    """One INSERT of an attachment row (same table, same indexes as an intent's row)."""

    def post(self, request):
        data = request.data
        pk = uuid.uuid4()
        now = timezone.now()
        Attachment.objects.create(
            id=pk,
            tenant_id=int(os.environ["BENCH_TENANT_ID"]),
            owner_id=request.user.pk,
            profile="image",
            filename=str(data.get("filename", "bench-bare.jpg"))[:255],
            declared_size=int(data.get("size", 0)),
            declared_type=str(data.get("content_type", ""))[:127],
            storage_key=f"bench/bare/{pk}",
            created_at=now,
            expires_at=now,
        )
        return Response({"id": str(pk), "status": "pending"}, status=201)


class BareSelectApi(APIView):
    """One SELECT by primary key."""

    def get(self, request, pk):
        row = Attachment.objects.filter(pk=pk).values("id", "status", "profile", "filename", "created_at").first()
        if row is None:
            raise Http404
        return Response({**row, "id": str(row["id"])})


class BareFileApi(APIView):
    """One SELECT by primary key, then stream the stored file."""

    def get(self, request, pk):
        row = Attachment.objects.filter(pk=pk).values("served_key", "content_type").first()
        if row is None:
            raise Http404
        path = settings.AIRLOCK_STORAGE_ROOT / row["served_key"]
        return FileResponse(open(path, "rb"), content_type=row["content_type"])
