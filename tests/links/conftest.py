"""Upload-link tests: a host's link, files sent through it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest


@pytest.fixture
def make_link(alice) -> Callable:
    """An upload link of alice's (the host's service account), made directly (the API is tested apart)."""
    from django.utils import timezone

    from attachments.models import UploadLink

    def make(**fields):
        now = timezone.now()
        values = {
            "tenant_id": alice.membership.tenant_id,
            "user": alice,
            "ref": "event:1",
            "title": "Anna & Ben",
            "created_at": now,
            "expires_at": now + timedelta(days=7),
            **fields,
        }
        return UploadLink.objects.create(**values)

    return make


@pytest.fixture
def link_file(alice) -> Callable:
    """A file alice uploads, marked as sent through `link` (as a guest's intent records it)."""
    from attachments.models import Approval, Attachment
    from tests.support import client_for, png_bytes, upload

    def make(link, *, data: bytes | None = None) -> str:
        pk = upload(client_for(alice), data or png_bytes(), filename="p.png", content_type="image/png")
        approval = Approval.PENDING if link.requires_approval else Approval.NOT_REQUIRED
        Attachment.objects.filter(pk=pk).update(upload_link=link, approval=approval)
        return pk

    return make
