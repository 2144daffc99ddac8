"""Tenant-scoped moderators: one tenant's files in every admin view and action; platform staff see all."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from attachments.models import Attachment, DeadLetter, Status
from tests.support import client_for, jpeg_bytes, make_staff, run_pipeline, upload

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/attachments/attachment/"


@pytest.fixture
def files(make_user):
    """A ready file and a dead-lettered one in each of two tenants."""
    alice = make_user("alice", tenant="acme")
    gina = make_user("gina", tenant="globex")
    made = {}
    for owner, prefix in ((alice, "acme"), (gina, "globex")):
        pk = upload(client_for(owner), jpeg_bytes((120, 90)), filename=f"{prefix}-photo.jpg")
        assert run_pipeline(pk) == "ready"
        made[prefix] = pk
        made[f"{prefix}-letter"] = DeadLetter.objects.create(
            kind=DeadLetter.Kind.PROCESSING, attachment_id=pk, last_error=f"{prefix}-letter-error"
        ).pk
    return made


def test_the_changelist_shows_only_the_moderators_tenant(acme_mod, platform_mod, files, browser_for):
    page = browser_for(acme_mod).get(CHANGELIST).content.decode()
    assert "acme-photo.jpg" in page and "globex-photo.jpg" not in page
    assert "globex" not in page  # not even as a tenant filter choice
    searched = browser_for(acme_mod).get(CHANGELIST, {"q": str(files["globex"])}).content.decode()
    assert "globex-photo.jpg" not in searched
    everything = browser_for(platform_mod).get(CHANGELIST).content.decode()
    assert "acme-photo.jpg" in everything and "globex-photo.jpg" in everything


def test_another_tenants_object_pages_are_out_of_reach(acme_mod, platform_mod, files, browser_for):
    client = browser_for(acme_mod)
    other = files["globex"]
    for url in (f"{CHANGELIST}{other}/change/", f"{CHANGELIST}{other}/history/"):
        response = client.get(url, follow=True)
        assert "globex-photo.jpg" not in response.content.decode()
    assert client.get(f"{CHANGELIST}{other}/thumbnail/").status_code == 404
    confirm = client.get(f"{CHANGELIST}{other}/moderate/take_down/", follow=True)
    assert "globex-photo.jpg" not in confirm.content.decode()
    own = client.get(f"{CHANGELIST}{files['acme']}/change/")
    assert own.status_code == 200 and "acme-photo.jpg" in own.content.decode()
    assert client.get(f"{CHANGELIST}{files['acme']}/thumbnail/").status_code == 200
    assert browser_for(platform_mod).get(f"{CHANGELIST}{other}/change/").status_code == 200


def test_actions_never_reach_another_tenant(acme_mod, files, browser_for):
    client = browser_for(acme_mod)
    client.post(f"{CHANGELIST}{files['globex']}/moderate/take_down/", {"post": "yes", "note": "abuse"})
    client.post(
        CHANGELIST,
        {
            "action": "moderate_take_down",
            "_selected_action": [files["globex"], files["acme"]],
            "post": "yes",
            "note": "abuse",
        },
    )
    assert Attachment.objects.get(pk=files["globex"]).status == Status.READY
    # A set reaching beyond the moderator's tenant is refused whole (#32), not silently cut to their part.
    assert Attachment.objects.get(pk=files["acme"]).status == Status.READY


def test_history_dead_letters_and_dashboard_are_scoped(acme_mod, platform_mod, files, browser_for):
    client = browser_for(acme_mod)
    logs = client.get("/admin/attachments/transitionlog/").content.decode()
    assert str(files["acme"]) in logs and str(files["globex"]) not in logs
    letters = client.get("/admin/attachments/deadletter/").content.decode()
    assert "acme-letter-error" in letters and "globex-letter-error" not in letters
    assert (
        client.get(f"/admin/attachments/deadletter/{files['globex-letter']}/change/", follow=True)
        .content.decode()
        .count("globex-letter-error")
        == 0
    )
    client.post(
        "/admin/attachments/deadletter/",
        {"action": "resolve_dead_letters", "post": "yes", "_selected_action": [files["globex-letter"]]},
    )
    assert DeadLetter.objects.get(pk=files["globex-letter"]).resolved_at is None

    scoped = client.get("/admin/dashboard/").context["snapshot"]
    platform = browser_for(platform_mod).get("/admin/dashboard/").context["snapshot"]
    assert scoped.distribution["ready"] == 1 and platform.distribution["ready"] == 2
    assert scoped.dead_letters == 1 and platform.dead_letters == 2


def test_platform_controls_are_for_platform_staff(acme_mod, platform_mod, browser_for):
    assert browser_for(acme_mod).get("/admin/sweeper/sweepercontrol/").status_code == 403
    assert browser_for(platform_mod).get("/admin/sweeper/sweepercontrol/", follow=True).status_code == 200


def test_staff_with_no_tenant_and_no_platform_flag_see_nothing(make_user, files, browser_for):
    from attachments.models import Membership

    user = make_staff("drifter")
    Membership.objects.filter(user=user).delete()
    user = get_user_model().objects.get(pk=user.pk)
    client = browser_for(user)
    assert "photo.jpg" not in client.get(CHANGELIST).content.decode()
    assert client.get("/admin/dashboard/").status_code == 403


def test_superusers_are_platform_staff(make_user, files, browser_for):
    root = make_user("root", tenant="acme", staff=True)
    root.is_superuser = True
    root.save()
    page = browser_for(root).get(CHANGELIST).content.decode()
    assert "acme-photo.jpg" in page and "globex-photo.jpg" in page


def test_tombstones_are_listed_for_their_own_tenants_staff(acme_mod, platform_mod, browser_for):
    import uuid

    from django.utils import timezone

    from attachments.models import Tenant, Tombstone

    for slug in ("acme", "globex"):
        tenant, _ = Tenant.objects.get_or_create(slug=slug)
        Tombstone.objects.create(
            attachment_id=uuid.uuid4(),
            tenant_id=tenant.pk,
            tenant_slug=slug,
            profile="image",
            storage_key=f"tenants/{slug}/gone-file",
            status="ready",
            lifecycle="deleted",
            created_at=timezone.now(),
            purged_at=timezone.now(),
            purged_by="system:purge",
        )
    scoped = browser_for(acme_mod).get("/admin/attachments/tombstone/")
    assert scoped.status_code == 200
    assert [t.tenant_slug for t in scoped.context["cl"].result_list] == ["acme"]
    everything = browser_for(platform_mod).get("/admin/attachments/tombstone/")
    assert sorted(t.tenant_slug for t in everything.context["cl"].result_list) == ["acme", "globex"]
