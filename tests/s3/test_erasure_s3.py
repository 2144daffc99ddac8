"""Erasure on S3 (moto over HTTP): every object of the user's files leaves the bucket; a held one stays."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from attachments.models import Attachment, Lifecycle
from attachments.retention.services.holds import attachment_hold_set
from tests.sweeper.support import all_keys, make_attachment

pytestmark = [pytest.mark.s3, pytest.mark.django_db]


def test_erase_user_removes_the_objects_from_the_bucket(s3, alice, bob):
    now = timezone.now()
    staged = make_attachment(alice, created_at=now, stored_size=4)
    committed = make_attachment(alice, created_at=now, lifecycle=Lifecycle.COMMITTED, stored_size=4)
    held = make_attachment(alice, created_at=now, lifecycle=Lifecycle.COMMITTED, stored_size=4)
    bobs = make_attachment(bob, created_at=now, lifecycle=Lifecycle.COMMITTED)
    attachment_hold_set(attachment_ids=[held.pk], actor="staff:root", reason="litigation")
    keys = {a.pk: all_keys(a) for a in (staged, committed, held, bobs)}
    assert all(s3.exists(k) for ks in keys.values() for k in ks)

    out = StringIO()
    call_command("erase_user", "alice", "--json", stdout=out)
    report = json.loads(out.getvalue())

    assert report["files_removed"] == 2 and report["objects_removed"] == 6 and report["bytes_removed"] == 16
    assert report["held_skipped"] == [str(held.pk)]
    for gone in (staged, committed):
        assert not any(s3.exists(k) for k in keys[gone.pk])
        assert Attachment.objects.get(pk=gone.pk).lifecycle == Lifecycle.DELETED
    assert all(s3.exists(k) for k in keys[held.pk] + keys[bobs.pk])
