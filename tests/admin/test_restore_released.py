"""The admin's "Restore released file": a tenant moderator brings a released file back within its grace (#29)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from attachments.models import Attachment, Lifecycle, TransitionLog
from tests.support import client_for, jpeg_bytes, run_pipeline, upload

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/attachments/attachment/"


def _released(owner, filename: str, ref: str = "ad:42") -> str:
    """A file committed to `ref` by its owner, then released through the API."""
    client = client_for(owner)
    pk = upload(client, jpeg_bytes((120, 90)), filename=filename)
    assert run_pipeline(pk) == "ready"
    assert client.post("/api/v1/attachments/commit", {"ids": [pk], "ref": ref}, format="json").status_code == 200
    assert client.post("/api/v1/attachments/release", {"ids": [pk]}, format="json").status_code == 200
    return pk


def _restore(client, pk: str):
    return client.post(f"{CHANGELIST}{pk}/moderate/restore_released/", {"post": "yes"}, follow=True)


def _messages(response) -> str:
    return " ".join(str(m) for m in response.context["messages"])


def test_the_change_page_offers_restore_for_a_released_file_only(alice, acme_mod, browser_for):
    released = _released(alice, "gone.jpg")
    kept = upload(client_for(alice), jpeg_bytes((64, 64)), filename="kept.jpg")
    client = browser_for(acme_mod)

    assert 'data-action="restore_released"' in client.get(f"{CHANGELIST}{released}/change/").content.decode()
    assert 'data-action="restore_released"' not in client.get(f"{CHANGELIST}{kept}/change/").content.decode()


def test_a_tenant_moderator_restores_a_released_file(alice, acme_mod, browser_for):
    pk = _released(alice, "gone.jpg")

    response = _restore(browser_for(acme_mod), pk)

    assert "Restore released file: done for 1 attachment" in _messages(response)
    body = client_for(alice).get(f"/api/v1/attachments/{pk}").json()
    assert body["lifecycle"] == "committed"
    assert client_for(alice).get(f"/api/v1/attachments/{pk}/download").status_code == 200
    log = TransitionLog.objects.get(attachment_id=pk, transition="restore")
    assert (log.from_status, log.to_status, log.actor) == ("released", "committed", "staff:acme-mod")


def test_restore_is_refused_after_the_grace(alice, acme_mod, browser_for):
    pk = _released(alice, "late.jpg")
    Attachment.objects.filter(pk=pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    response = _restore(browser_for(acme_mod), pk)

    assert "NOT_RESTORABLE: The release grace is over" in _messages(response)
    assert Attachment.objects.get(pk=pk).lifecycle == Lifecycle.RELEASED


def test_restore_is_refused_for_a_held_file(alice, acme_mod, browser_for):
    pk = _released(alice, "evidence.jpg")
    Attachment.objects.filter(pk=pk).update(legal_hold=True)

    response = _restore(browser_for(acme_mod), pk)

    assert "under a legal hold" in _messages(response)
    assert Attachment.objects.get(pk=pk).lifecycle == Lifecycle.RELEASED
    assert not TransitionLog.objects.filter(attachment_id=pk, transition="restore").exists()


def test_restore_is_refused_for_a_deleted_or_never_released_file(alice, acme_mod, browser_for):
    deleted = _released(alice, "swept.jpg")
    Attachment.objects.filter(pk=deleted).update(lifecycle=Lifecycle.DELETED, deleted_at=timezone.now())
    staged = upload(client_for(alice), jpeg_bytes((64, 64)), filename="draft.jpg")
    client = browser_for(acme_mod)

    for pk, lifecycle in ((deleted, Lifecycle.DELETED), (staged, Lifecycle.STAGED)):
        response = _restore(client, pk)
        assert f"NOT_RESTORABLE: Only a released file can be restored; this one is {lifecycle}" in _messages(response)
        assert Attachment.objects.get(pk=pk).lifecycle == lifecycle


def test_bulk_restore_works_on_the_own_tenant_and_refuses_a_set_reaching_beyond_it(
    make_user, alice, acme_mod, browser_for
):
    gina = make_user("gina", tenant="globex")
    foreign = _released(gina, "globex.jpg")
    own, also_own = _released(alice, "acme-1.jpg"), _released(alice, "acme-2.jpg", ref="ad:43")
    client = browser_for(acme_mod)

    _restore(client, foreign)
    mixed = client.post(
        CHANGELIST,
        {"action": "moderate_restore_released", "_selected_action": [foreign, own], "post": "yes"},
        follow=True,
    )
    assert "nothing was done" in _messages(mixed)
    assert Attachment.objects.get(pk=foreign).lifecycle == Lifecycle.RELEASED
    assert Attachment.objects.get(pk=own).lifecycle == Lifecycle.RELEASED

    done = client.post(
        CHANGELIST,
        {"action": "moderate_restore_released", "_selected_action": [own, also_own], "post": "yes"},
        follow=True,
    )
    assert "Restore released file: done for 2 attachment" in _messages(done)
    assert [Attachment.objects.get(pk=pk).lifecycle for pk in (own, also_own)] == [Lifecycle.COMMITTED] * 2
