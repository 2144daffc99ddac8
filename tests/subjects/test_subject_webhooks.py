"""Webhook bodies are the resource: they carry the file's subject, through to its erasure."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from attachments.models import Tenant
from tests.subjects.support import as_subject
from tests.support import jpeg_bytes, run_pipeline, upload
from webhooks.models import WebhookEndpoint, WebhookEvent

pytestmark = pytest.mark.django_db


def _bodies(event_type: str) -> list[dict]:
    return [json.loads(e.body) for e in WebhookEvent.objects.filter(type=event_type).order_by("created_at", "pk")]


def test_events_name_the_subject_the_file_is_for(alice):
    WebhookEndpoint.objects.create(tenant=Tenant.objects.get(slug="acme"), url="https://hooks.example/airlock")
    ann = as_subject(alice, "user-ann")
    anns = upload(ann, jpeg_bytes())
    hosts = upload(as_subject(alice, None), jpeg_bytes((50, 50)))
    assert run_pipeline(anns) == run_pipeline(hosts) == "ready"

    ready = {body["data"]["id"]: body["data"] for body in _bodies("attachment.ready")}
    assert ready[anns]["subject"] == "user-ann"
    assert ready[hosts]["subject"] == "alice"  # no header: the account is the subject
    assert ready[anns] == {**ann.get(f"/api/v1/attachments/{anns}").json(), "links": ready[anns]["links"]}

    call_command("erase_subject", "--tenant", "acme", "user-ann", "--operator", "ops-anna", stdout=StringIO())
    [deleted] = _bodies("attachment.deleted")
    assert deleted["data"]["id"] == anns and deleted["data"]["subject"] == "user-ann"
