#!/usr/bin/env python
"""Prepare the API benchmark's database and count queries per request (run by bench/api.py).

With DJANGO_SETTINGS_MODULE=bench.settings and the bench database in
DATABASE_URL: migrate, create users with tokens, one ready attachment (through
the inline pipeline, so it has its sanitized copy and thumbnail), rows to read,
then count the queries of each benchmarked endpoint in-process with
CaptureQueriesContext, and the list endpoint with 1 vs 20 attachments (no N+1).
Prints one JSON line.
"""

from __future__ import annotations

import sys
import uuid
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import bench_django, emit, make_user, small_jpeg  # noqa: E402

USERS = 50


def main() -> None:
    bench_django("bench.settings")
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone
    from rest_framework.test import APIClient

    from attachments.models import Attachment, Derivative, Status
    from tests.support import run_pipeline, upload

    users = [make_user(f"bench-{i}", tenant="bench") for i in range(USERS)]
    owner = users[0]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {owner.api_token}")
    ready_id = upload(client, small_jpeg(seed=1, size=(320, 240)), filename="small.jpg")
    assert run_pipeline(ready_id) == "ready"
    ready = Attachment.objects.get(pk=ready_id)

    def ready_rows(user, n: int) -> list[str]:
        ids = []
        now = timezone.now()
        for i in range(n):
            pk = uuid.uuid4()
            row = Attachment.objects.create(
                id=pk,
                tenant=ready.tenant,
                owner=user,
                profile="image",
                status=Status.READY,
                filename=f"read-{i}.jpg",
                declared_size=ready.declared_size,
                declared_type="image/jpeg",
                storage_key=f"bench/read/{pk}",
                served_key=ready.served_key,
                size=ready.size,
                content_type="image/jpeg",
                sha256=ready.sha256,
                metadata=ready.metadata,
                created_at=now - timedelta(seconds=i),
                uploaded_at=now,
                ready_at=now,
                expires_at=now + timedelta(days=7),
            )
            Derivative.objects.create(
                attachment=row,
                kind="thumbnail",
                storage_key=f"bench/read/{pk}/t.webp",
                content_type="image/webp",
                size=100,
                width=256,
                height=192,
            )
            ids.append(str(pk))
        return ids

    read_ids = ready_rows(owner, 20)
    one, twenty = users[1], users[2]
    ready_rows(one, 1)
    ready_rows(twenty, 20)

    def count(user, method: str, url: str, **kwargs) -> int:
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Token {user.api_token}")
        with CaptureQueriesContext(connection) as ctx:
            response = getattr(api, method)(url, **kwargs)
            if getattr(response, "streaming", False):
                b"".join(response.streaming_content)
        assert response.status_code < 300, (url, response.status_code)
        return len(ctx.captured_queries)

    import os

    os.environ["BENCH_TENANT_ID"] = str(ready.tenant_id)
    intent_body = {"profile": "image", "filename": "bench-intent.jpg", "size": 1000, "content_type": "image/jpeg"}
    queries = {
        "intent": count(owner, "post", "/api/v1/uploads", data=intent_body, format="json"),
        "status": count(owner, "get", f"/api/v1/attachments/{read_ids[0]}"),
        "download": count(owner, "get", f"/api/v1/attachments/{ready_id}/download"),
        "list_1": count(one, "get", "/api/v1/attachments"),
        "list_20": count(twenty, "get", "/api/v1/attachments"),
        "bare_insert": count(owner, "post", "/bench/bare/insert", data=intent_body, format="json"),
        "bare_select": count(owner, "get", f"/bench/bare/select/{read_ids[0]}"),
        "bare_file": count(owner, "get", f"/bench/bare/file/{ready_id}"),
    }
    Attachment.objects.filter(filename__in=["bench-intent.jpg", "bench-bare.jpg"]).delete()
    emit(
        {
            "tokens": [u.api_token for u in users],
            "tenant_id": ready.tenant_id,
            "ready_id": ready_id,
            "read_ids": read_ids,
            "queries": queries,
            "database": connection.vendor,
        }
    )


if __name__ == "__main__":
    main()
