"""Bulk actions act safely (#32 "Act safely"): the confirmation names how many files and which tenants,
and a tenant-scoped moderator's set that reaches beyond their tenant is refused whole."""

from __future__ import annotations

import re

import pytest

from attachments.models import Attachment, DeadLetter, TransitionLog
from tests.support import client_for, jpeg_bytes, make_staff, run_pipeline, upload

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/attachments/attachment/"


@pytest.fixture
def two_tenants(alice, mallory):
    made = {}
    for owner, name in ((alice, "acme-1.jpg"), (alice, "acme-2.jpg"), (mallory, "evil-1.jpg")):
        pk = upload(client_for(owner), jpeg_bytes((40 + len(made), 30)), filename=name)
        assert run_pipeline(pk) == "ready"
        made[name] = pk
    return made


@pytest.fixture
def acme_mod(alice):
    return make_staff("acme-mod")


def _scope(html: str) -> str:
    found = re.search(r'<p id="airlock-confirm-scope"[^>]*>(.*?)</p>', html, re.S)
    assert found, "no count/tenant line on the confirmation page"
    return re.sub(r"<[^>]+>", "", found.group(1)).strip()


def test_the_confirmation_names_the_count_and_every_tenant_touched(moderator, browser_for, two_tenants):
    response = browser_for(moderator).post(
        CHANGELIST, {"action": "moderate_rescan", "_selected_action": list(two_tenants.values())}
    )
    assert response.status_code == 200
    assert _scope(response.content.decode()) == "3 attachments in 2 tenants: acme, evil."
    assert not TransitionLog.objects.filter(transition__icontains="rescan").exists()  # nothing ran yet


def test_a_one_tenant_set_names_its_tenant(acme_mod, browser_for, two_tenants):
    response = browser_for(acme_mod).post(
        CHANGELIST, {"action": "moderate_rescan", "_selected_action": [two_tenants["acme-1.jpg"]]}
    )
    assert _scope(response.content.decode()) == "1 attachment in 1 tenant: acme."


@pytest.mark.parametrize("stage", [{}, {"post": "yes", "note": "spam"}])
def test_a_tenant_moderator_cannot_act_across_tenants(acme_mod, browser_for, two_tenants, stage):
    client = browser_for(acme_mod)
    response = client.post(
        CHANGELIST,
        {
            "action": "moderate_take_down",
            **stage,
            "_selected_action": [two_tenants["acme-1.jpg"], two_tenants["evil-1.jpg"]],
        },
        follow=True,
    )
    html = response.content.decode()
    assert "airlock-confirm-scope" not in html  # no confirmation page
    assert "belong to another tenant than yours" in html and "nothing was done" in html
    assert set(Attachment.objects.values_list("status", flat=True)) == {"ready"}
    assert not TransitionLog.objects.filter(transition="take_down").exists()


def test_a_tenant_moderator_still_acts_on_their_own_tenant(acme_mod, browser_for, two_tenants):
    selection = {
        "action": "moderate_take_down",
        "_selected_action": [two_tenants["acme-1.jpg"], two_tenants["acme-2.jpg"]],
    }
    client = browser_for(acme_mod)
    assert _scope(client.post(CHANGELIST, selection).content.decode()) == "2 attachments in 1 tenant: acme."
    assert client.post(CHANGELIST, {**selection, "post": "yes", "note": "spam"}).status_code == 302
    assert Attachment.objects.get(pk=two_tenants["evil-1.jpg"]).status == "ready"
    assert Attachment.objects.filter(status="rejected").count() == 2


def test_dead_letter_confirmation_names_tenants(moderator, browser_for, two_tenants):
    letters = [
        DeadLetter.objects.create(kind=DeadLetter.Kind.PROCESSING, attachment_id=pk, last_error="x").pk
        for pk in two_tenants.values()
    ]
    response = browser_for(moderator).post(
        "/admin/attachments/deadletter/", {"action": "requeue_dead_letters", "_selected_action": letters}
    )
    assert _scope(response.content.decode()) == "3 dead letters in 2 tenants: acme, evil."


@pytest.mark.parametrize("action", ["resolve_dead_letters", "requeue_dead_letters"])
@pytest.mark.parametrize("stage", [{}, {"post": "yes"}])
def test_a_tenant_moderator_cannot_act_on_dead_letters_across_tenants(
    acme_mod, browser_for, two_tenants, action, stage
):
    letters = {
        name: DeadLetter.objects.create(kind=DeadLetter.Kind.PROCESSING, attachment_id=pk, last_error="x").pk
        for name, pk in two_tenants.items()
    }
    response = browser_for(acme_mod).post(
        "/admin/attachments/deadletter/",
        {"action": action, **stage, "_selected_action": [letters["acme-1.jpg"], letters["evil-1.jpg"]]},
        follow=True,
    )
    html = response.content.decode()
    assert "airlock-confirm-scope" not in html  # no confirmation page
    assert "dead letter(s) belong to another tenant than yours" in html and "nothing was done" in html
    assert not DeadLetter.objects.filter(resolved_at__isnull=False).exists()  # not even the acme one
