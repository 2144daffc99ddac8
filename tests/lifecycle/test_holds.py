"""Retention holds (issue #29 item 3): a held file survives every delete path, and says so."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from attachments.models import Attachment, Lifecycle, RefHold, Status, TransitionLog
from attachments.retention.services.holds import (
    attachment_hold_clear,
    attachment_hold_set,
    ref_hold_clear,
    ref_hold_set,
)
from attachments.services.lifecycle import attachments_discard_all
from sweeper.reconcile import reconcile_storage
from sweeper.sweep import sweep_expired
from tests.support import jpeg_bytes, png_bytes, run_pipeline, upload
from tests.sweeper.support import files_of, make_attachment

pytestmark = pytest.mark.django_db

ROOT = "staff:root"


def _committed(owner, ref="ad:42"):
    attachment = make_attachment(owner, created_at=timezone.now(), lifecycle=Lifecycle.COMMITTED)
    Attachment.objects.filter(pk=attachment.pk).update(ref=ref)
    attachment.ref = ref
    return attachment


def _hold(attachment):
    attachment_hold_set(attachment_ids=[attachment.pk], actor=ROOT, reason="litigation 2026-17")


def _lifecycle(attachment) -> str:
    return Attachment.objects.get(pk=attachment.pk).lifecycle


def _legal_hold_error(response, *ids) -> None:
    assert response.status_code == 409, response.content
    error = response.json()["error"]
    assert error["code"] == "LEGAL_HOLD" and set(error["details"]) == {str(i) for i in ids}


# --- the API refuses ---------------------------------------------------------------------


def test_discard_of_a_held_draft_is_409(alice, api):
    draft = make_attachment(alice, created_at=timezone.now())
    _hold(draft)
    _legal_hold_error(api(alice).post(f"/api/v1/attachments/{draft.pk}/discard"), draft.pk)
    assert _lifecycle(draft) == Lifecycle.STAGED


def test_delete_of_a_held_file_is_409(alice, api):
    photo = _committed(alice)
    _hold(photo)
    _legal_hold_error(api(alice).delete(f"/api/v1/attachments/{photo.pk}"), photo.pk)
    assert _lifecycle(photo) == Lifecycle.COMMITTED


def test_release_of_a_held_ref_is_409_and_releases_nothing(alice, api):
    photos = [_committed(alice) for _ in range(2)]
    ref_hold_set(tenant="acme", ref="ad:42", actor=ROOT, reason="court order")
    response = api(alice).post("/api/v1/attachments/release", {"ref": "ad:42"}, format="json")
    _legal_hold_error(response, *(p.pk for p in photos))
    assert [_lifecycle(p) for p in photos] == [Lifecycle.COMMITTED] * 2


def test_release_by_ids_with_one_held_is_409_all_or_nothing(alice, api):
    held, free = _committed(alice), _committed(alice)
    _hold(held)
    response = api(alice).post("/api/v1/attachments/release", {"ids": [str(free.pk), str(held.pk)]}, format="json")
    _legal_hold_error(response, held.pk)
    assert (_lifecycle(held), _lifecycle(free)) == (Lifecycle.COMMITTED, Lifecycle.COMMITTED)


def test_commit_replace_that_would_release_a_held_file_is_409(alice, api):
    held, kept = _committed(alice), _committed(alice)
    _hold(held)
    response = api(alice).post(
        "/api/v1/attachments/commit", {"ids": [str(kept.pk)], "ref": "ad:42", "replace": True}, format="json"
    )
    _legal_hold_error(response, held.pk)
    assert (_lifecycle(held), _lifecycle(kept)) == (Lifecycle.COMMITTED, Lifecycle.COMMITTED)


def test_restore_of_a_held_released_file_is_409_and_it_stays_released(alice, api):
    # A hold freezes the file as it was when held (the evidence), released included; the admin's
    # "Restore released file" refuses the same way.
    photo = _committed(alice)
    client = api(alice)
    assert client.delete(f"/api/v1/attachments/{photo.pk}").status_code == 204
    ref_hold_set(tenant="acme", ref="ad:42", actor=ROOT, reason="court order")
    _legal_hold_error(client.post(f"/api/v1/attachments/{photo.pk}/restore"), photo.pk)
    assert _lifecycle(photo) == Lifecycle.RELEASED
    # Committing it back to its ref within the grace (an edit undone) is a restore too.
    commit = client.post("/api/v1/attachments/commit", {"ids": [str(photo.pk)], "ref": "ad:42"}, format="json")
    _legal_hold_error(commit, photo.pk)
    assert _lifecycle(photo) == Lifecycle.RELEASED


def test_the_resource_shows_legal_hold_of_the_file_and_of_its_ref(alice, bob, api):
    own, by_ref, free = _committed(alice, ref="ad:1"), _committed(alice, ref="ad:2"), _committed(alice, ref="ad:3")
    _hold(own)
    ref_hold_set(tenant="acme", ref="ad:2", actor=ROOT, reason="court order")
    held = {str(a.pk): api(alice).get(f"/api/v1/attachments/{a.pk}").json()["legal_hold"] for a in (own, by_ref, free)}
    assert held == {str(own.pk): True, str(by_ref.pk): True, str(free.pk): False}
    listed = {a["id"]: a["legal_hold"] for a in api(alice).get("/api/v1/attachments").json()["results"]}
    assert listed == held
    ref_hold_clear(tenant="acme", ref="ad:2", actor=ROOT)
    assert api(alice).get(f"/api/v1/attachments/{by_ref.pk}").json()["legal_hold"] is False


# --- what skips held files -----------------------------------------------------------------


def test_discard_all_leaves_a_held_draft(alice):
    held, free = (make_attachment(alice, created_at=timezone.now()) for _ in range(2))
    _hold(held)
    assert attachments_discard_all(user=alice) == 1
    assert (_lifecycle(held), _lifecycle(free)) == (Lifecycle.STAGED, Lifecycle.DISCARDED)


def test_a_new_avatar_does_not_discard_a_held_one(alice, api):
    client = api(alice)
    old = upload(client, jpeg_bytes((100, 100)), profile="avatar", filename="me.jpg")
    assert run_pipeline(old) == "ready"
    assert (
        client.post("/api/v1/attachments/commit", {"ids": [old], "ref": "profile:1"}, format="json").status_code == 200
    )
    attachment_hold_set(attachment_ids=[old], actor=ROOT, reason="evidence")
    new = upload(client, png_bytes((90, 90)), profile="avatar", filename="me.png", content_type="image/png")
    assert run_pipeline(new) == "ready"
    assert (
        client.post("/api/v1/attachments/commit", {"ids": [new], "ref": "profile:1"}, format="json").status_code == 200
    )
    assert Attachment.objects.get(pk=old).lifecycle == Lifecycle.COMMITTED


def test_the_sweeper_keeps_an_expired_held_draft_until_the_hold_is_cleared(alice):
    draft = make_attachment(alice, created_at=timezone.now() - timedelta(days=30))  # long expired
    _hold(draft)
    sweep_expired(now=timezone.now())
    assert _lifecycle(draft) == Lifecycle.STAGED and len(files_of(draft)) == 3
    attachment_hold_clear(attachment_ids=[draft.pk], actor=ROOT)
    sweep_expired(now=timezone.now())
    assert _lifecycle(draft) == Lifecycle.DELETED and files_of(draft) == set()


def test_the_sweeper_keeps_a_released_file_of_a_held_ref_past_its_grace(alice, api):
    photo = _committed(alice)
    assert api(alice).delete(f"/api/v1/attachments/{photo.pk}").status_code == 204
    ref_hold_set(tenant="acme", ref="ad:42", actor=ROOT, reason="court order")  # held after the release
    sweep_expired(now=timezone.now() + timedelta(days=3))
    assert _lifecycle(photo) == Lifecycle.RELEASED and len(files_of(photo)) == 3


def test_reconcile_keeps_a_held_files_expired_quarantine_copy(alice, settings):
    settings.AIRLOCK_RETENTION_DAYS = settings.AIRLOCK_RETENTION_DAYS.replace(quarantine=0)
    rejected = make_attachment(
        alice, created_at=timezone.now(), status=Status.REJECTED, quarantined=True, served=False, thumbnail=False
    )
    _hold(rejected)
    report = reconcile_storage(now=timezone.now() + timedelta(days=1))
    assert [(f.kind, f.action, f.detail) for f in report.findings] == [("quarantine_expired", "kept", "legal_hold")]
    assert len(files_of(rejected)) == 1


# --- setting and clearing ---------------------------------------------------------------------


def test_holds_are_audited_and_a_ref_hold_keeps_its_record(alice):
    photo = _committed(alice)
    _hold(photo)
    attachment_hold_clear(attachment_ids=[photo.pk], actor=ROOT, reason="case closed")
    assert list(
        TransitionLog.objects.filter(attachment_id=photo.pk, transition__startswith="legal_hold").values_list(
            "transition", "actor", "message"
        )
    ) == [("legal_hold", ROOT, "litigation 2026-17"), ("legal_hold_clear", ROOT, "case closed")]
    ref_hold_set(tenant="acme", ref="ad:42", actor=ROOT, reason="court order")
    assert ref_hold_set(tenant="acme", ref="ad:42", actor="staff:other", reason="again").created_by == ROOT
    assert ref_hold_clear(tenant="acme", ref="ad:42", actor=ROOT) is True
    assert ref_hold_clear(tenant="acme", ref="ad:42", actor=ROOT) is False
    hold = RefHold.objects.get()
    assert (hold.created_by, hold.cleared_by, hold.cleared_at is not None) == (ROOT, ROOT, True)


def test_a_hold_needs_a_reason(alice):
    photo = _committed(alice)
    with pytest.raises(Exception, match="not valid"):
        attachment_hold_set(attachment_ids=[photo.pk], actor=ROOT, reason=" ")


def test_the_hold_command_sets_lists_and_clears(alice):
    photo = _committed(alice)

    def hold(*args):
        out = StringIO()
        call_command("hold", *args, "--json", "--operator", "ops-anna", stdout=out)
        return json.loads(out.getvalue())

    assert hold("set", "--id", str(photo.pk), "--reason", "subpoena") == {"held": [str(photo.pk)]}
    assert hold("set", "--tenant", "acme", "--ref", "ad:42", "--reason", "subpoena")["by"] == "command:hold:ops-anna"
    listed = hold("list")
    assert sorted((r["kind"], r["target"]) for r in listed) == [("file", str(photo.pk)), ("ref", "ad:42")]
    assert hold("clear", "--tenant", "acme", "--ref", "ad:42")["cleared"] is True
    assert hold("clear", "--id", str(photo.pk)) == {"cleared": [str(photo.pk)]}
    assert hold("list") == []
