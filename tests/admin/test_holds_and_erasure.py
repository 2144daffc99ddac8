"""Legal holds and user erasure in the admin: platform staff only, never a tenant-scoped moderator."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.utils import timezone

from attachments.models import ApiToken, Attachment, Lifecycle, RefHold
from tests.sweeper.support import files_of, make_attachment

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/attachments/attachment/"
USERS = "/admin/auth/user/"


def _may_manage_users(user):
    # Both may manage users here, so only the platform check stands between them and erasure.
    user.user_permissions.add(*Permission.objects.filter(codename__in=["view_user", "change_user"]))
    return get_user_model().objects.get(pk=user.pk)


@pytest.fixture
def acme_mod(acme_mod):
    return _may_manage_users(acme_mod)


@pytest.fixture
def platform_mod(platform_mod):
    return _may_manage_users(platform_mod)


@pytest.fixture
def photo(alice):
    row = make_attachment(alice, created_at=timezone.now(), lifecycle=Lifecycle.COMMITTED)
    Attachment.objects.filter(pk=row.pk).update(ref="ad:42")
    return row


def _hold_post(client, pk):
    return client.post(
        CHANGELIST,
        {"action": "moderate_legal_hold", "_selected_action": [str(pk)], "post": "yes", "note": "litigation 2026-17"},
    )


def test_platform_staff_hold_a_file_and_the_admin_shows_it(platform_mod, photo, browser_for):
    client = browser_for(platform_mod)
    assert "moderate_legal_hold" in client.get(CHANGELIST).content.decode()
    _hold_post(client, photo.pk)
    photo.refresh_from_db()
    assert photo.legal_hold is True
    listing = client.get(CHANGELIST).content.decode()
    assert re.search(r'class="field-status_reason">[^<]*<br><span class="airlock-quiet">legal hold</span>', listing)
    page = client.get(f"{CHANGELIST}{photo.pk}/change/").content.decode()
    assert "file held by staff:ops-mod" in page and "litigation 2026-17" in page
    assert "Clear legal hold" in page


def test_a_tenant_moderator_cannot_place_or_clear_a_hold(acme_mod, photo, browser_for):
    client = browser_for(acme_mod)
    assert "moderate_legal_hold" not in client.get(CHANGELIST).content.decode()
    _hold_post(client, photo.pk)
    assert client.get(f"{CHANGELIST}{photo.pk}/moderate/legal_hold/").status_code == 403
    assert client.post(f"{CHANGELIST}{photo.pk}/moderate/legal_hold/", {"note": "x"}).status_code == 403
    photo.refresh_from_db()
    assert photo.legal_hold is False
    assert "Place legal hold" not in client.get(f"{CHANGELIST}{photo.pk}/change/").content.decode()
    assert client.get("/admin/attachments/refhold/").status_code == 403
    client.post("/admin/attachments/refhold/add/", {"tenant_slug": "acme", "ref": "ad:42", "reason": "x"})
    assert not RefHold.objects.exists()


def test_platform_staff_hold_a_ref_through_the_service(platform_mod, photo, browser_for):
    client = browser_for(platform_mod)
    response = client.post(
        "/admin/attachments/refhold/add/", {"tenant_slug": "acme", "ref": "ad:42", "reason": "court order"}
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    hold = RefHold.objects.get()
    assert (hold.tenant.slug, hold.ref, hold.created_by) == ("acme", "ad:42", "staff:ops-mod")
    assert re.search(r'<span class="airlock-quiet">legal hold</span>', client.get(CHANGELIST).content.decode())
    client.post("/admin/attachments/refhold/", {"action": "clear_holds", "_selected_action": [str(hold.pk)]})
    hold.refresh_from_db()
    assert hold.cleared_by == "staff:ops-mod" and hold.cleared_at is not None


def test_platform_staff_erase_a_user_after_seeing_the_dry_run(platform_mod, alice, photo, browser_for, api):
    client = browser_for(platform_mod)
    first = client.post(USERS, {"action": "erase_users", "_selected_action": [str(alice.pk)]})
    text = first.content.decode()
    assert first.status_code == 200 and "would let go 1 files" in text and "3 objects" in text
    assert len(files_of(photo)) == 3  # the confirmation page changed nothing

    client.post(USERS, {"action": "erase_users", "_selected_action": [str(alice.pk)], "post": "yes"})

    photo.refresh_from_db()
    assert photo.lifecycle == Lifecycle.DELETED and files_of(photo) == set()
    assert not ApiToken.objects.filter(user=alice).exists()
    assert api(alice).get("/api/v1/attachments").status_code == 401


def test_a_tenant_moderator_cannot_erase(acme_mod, alice, photo, browser_for):
    client = browser_for(acme_mod)
    assert client.get(USERS).status_code == 200  # may see users here, but not the action
    assert "erase_users" not in client.get(USERS).content.decode()
    client.post(USERS, {"action": "erase_users", "_selected_action": [str(alice.pk)], "post": "yes"})
    photo.refresh_from_db()
    assert photo.lifecycle == Lifecycle.COMMITTED and len(files_of(photo)) == 3
    assert ApiToken.objects.filter(user=alice).exists()
