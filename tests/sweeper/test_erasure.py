"""Erasure (issue #29 item 3): erase_user / erase_tenant let everything go now, revoke tokens, remove objects."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from attachments.models import ApiToken, Attachment, Lifecycle, Status, TransitionLog
from attachments.retention.services.holds import attachment_hold_set, ref_hold_set
from sweeper.control import sweeper_control_set
from sweeper.sweep import sweep_expired
from tests.sweeper.support import files_of, make_attachment
from webhooks.models import WebhookEndpoint, WebhookEvent

pytestmark = pytest.mark.django_db


def _estate(owner):
    """One file in each lifecycle an owner can have before deletion; each stores 3 objects, 8 bytes."""
    now = timezone.now()
    rows = {
        "staged": make_attachment(owner, created_at=now, status=Status.PENDING, stored_size=4),
        "committed": make_attachment(owner, created_at=now, lifecycle=Lifecycle.COMMITTED, stored_size=4),
        "released": make_attachment(owner, created_at=now, lifecycle=Lifecycle.COMMITTED, stored_size=4),
        "discarded": make_attachment(
            owner,
            created_at=now,
            lifecycle=Lifecycle.DISCARDED,
            stored_size=4,
            expires_at=now + timezone.timedelta(hours=1),
        ),
    }
    Attachment.objects.filter(pk=rows["released"].pk).update(
        lifecycle=Lifecycle.RELEASED, released_at=now, expires_at=now + timezone.timedelta(days=1)
    )
    return rows


def _erase(*args: str) -> dict:
    out = StringIO()
    call_command(*args, "--json", "--operator", "ops-anna", stdout=out)
    return json.loads(out.getvalue())


def _token_works(api, user) -> int:
    return api(user).get("/api/v1/attachments").status_code


def test_dry_run_reports_counts_and_bytes_and_changes_nothing(alice, bob, api):
    rows = _estate(alice)
    bobs = make_attachment(bob, created_at=timezone.now(), lifecycle=Lifecycle.COMMITTED)
    logs_before = TransitionLog.objects.count()
    before = {a.pk: (a.lifecycle, a.expires_at) for a in Attachment.objects.all()}

    report = _erase("erase_user", "alice", "--dry-run")

    assert report["dry_run"] is True and report["subject"] == "user alice"
    assert report["files"] == 4
    assert report["by_lifecycle"] == {"staged": 1, "committed": 1, "released": 1, "discarded": 1}
    assert report["objects"] == 12  # original, served copy and thumbnail of each
    assert report["bytes"] == 4 * (4 + 4)  # the stored original and the thumbnail's size
    assert report["tokens_revoked"] == 1 and report["held_skipped"] == []
    assert report["objects_removed"] == 0 and report["files_removed"] == 0
    assert {a.pk: (a.lifecycle, a.expires_at) for a in Attachment.objects.all()} == before
    assert all(len(files_of(a)) == 3 for a in [*rows.values(), bobs])
    assert TransitionLog.objects.count() == logs_before
    assert _token_works(api, alice) == 200


def test_erase_user_removes_objects_revokes_tokens_audits_and_sends_deleted(alice, bob, api):
    WebhookEndpoint.objects.create(tenant=alice.membership.tenant, url="https://hooks.example/airlock")
    rows = _estate(alice)
    bobs = make_attachment(bob, created_at=timezone.now(), lifecycle=Lifecycle.COMMITTED)
    assert _token_works(api, alice) == 200

    report = _erase("erase_user", str(alice.pk))  # by id as well as by name

    assert report["dry_run"] is False and report["files"] == 4 and report["deferred"] == ""
    assert report["files_removed"] == 4 and report["objects_removed"] == 12 and report["bytes_removed"] == 32
    assert report["tokens_revoked"] == 1 and report["errors"] == []
    for row in rows.values():
        row.refresh_from_db()
        assert row.lifecycle == Lifecycle.DELETED and files_of(row) == set()
    assert _token_works(api, alice) == 401
    assert not ApiToken.objects.filter(user=alice).exists()
    # bob (same tenant) keeps his file and his token
    bobs.refresh_from_db()
    assert bobs.lifecycle == Lifecycle.COMMITTED and len(files_of(bobs)) == 3 and _token_works(api, bob) == 200
    # audited with the operator, erase then removal
    actor = "command:erase_user:ops-anna"
    assert TransitionLog.objects.filter(actor=actor, transition="erase").count() == 4
    assert TransitionLog.objects.filter(actor=actor, transition="sweep_delete").count() == 4
    # one attachment.deleted per file, when its bytes went
    deleted = WebhookEvent.objects.filter(type="attachment.deleted")
    assert sorted(str(e.attachment_id) for e in deleted) == sorted(str(a.pk) for a in rows.values())


def test_erasure_skips_the_grace(alice):
    rows = _estate(alice)
    _erase("erase_user", "alice")
    released = Attachment.objects.get(pk=rows["released"].pk)
    assert released.lifecycle == Lifecycle.DELETED  # a day of grace left, removed anyway


def test_erase_tenant_takes_every_member_and_no_other_tenant(alice, bob, mallory, api):
    ours = [make_attachment(u, created_at=timezone.now(), lifecycle=Lifecycle.COMMITTED) for u in (alice, bob)]
    theirs = make_attachment(mallory, created_at=timezone.now(), lifecycle=Lifecycle.COMMITTED)

    report = _erase("erase_tenant", "acme")

    assert report["files_removed"] == 2 and report["tokens_revoked"] == 2
    assert all(files_of(a) == set() for a in ours)
    assert _token_works(api, alice) == 401 and _token_works(api, bob) == 401
    assert len(files_of(theirs)) == 3 and _token_works(api, mallory) == 200


def test_held_files_are_skipped_and_reported(alice):
    held = make_attachment(alice, created_at=timezone.now(), lifecycle=Lifecycle.COMMITTED)
    by_ref = make_attachment(alice, created_at=timezone.now(), lifecycle=Lifecycle.COMMITTED)
    Attachment.objects.filter(pk=by_ref.pk).update(ref="case:7")
    free = make_attachment(alice, created_at=timezone.now(), lifecycle=Lifecycle.COMMITTED)
    attachment_hold_set(attachment_ids=[held.pk], actor="staff:root", reason="litigation")
    ref_hold_set(tenant="acme", ref="case:7", actor="staff:root", reason="litigation")

    dry = _erase("erase_user", "alice", "--dry-run")
    report = _erase("erase_user", "alice")

    for r in (dry, report):
        assert sorted(r["held_skipped"]) == sorted([str(held.pk), str(by_ref.pk)]) and r["files"] == 1
    assert report["files_removed"] == 1 and files_of(free) == set()
    for row in (held, by_ref):
        row.refresh_from_db()
        assert row.lifecycle == Lifecycle.COMMITTED and len(files_of(row)) == 3


def test_under_the_killswitch_files_are_due_and_the_next_sweep_removes_them(alice):
    rows = _estate(alice)
    sweeper_control_set(killswitch=True, actor="test")

    report = _erase("erase_user", "alice")

    assert report["deferred"] == "killswitch" and report["files_removed"] == 0 and report["tokens_revoked"] == 1
    assert all(len(files_of(a)) == 3 for a in rows.values())
    lifecycles = set(Attachment.objects.filter(owner=alice).values_list("lifecycle", flat=True))
    assert lifecycles == {Lifecycle.DISCARDED, Lifecycle.RELEASED}
    sweeper_control_set(killswitch=False, actor="test")
    sweep_expired(now=timezone.now())
    assert all(files_of(a) == set() for a in rows.values())


def test_an_unknown_user_is_a_clear_error():
    with pytest.raises(Exception, match="No user 'nobody'"):
        call_command("erase_user", "nobody", "--dry-run")


def test_the_plain_report_says_what_it_did(alice):
    _estate(alice)
    out = StringIO()
    call_command("erase_user", "alice", "--dry-run", stdout=out)
    assert "would let go 4 files" in out.getvalue() and "12 objects, 32 bytes" in out.getvalue()
