"""A tenant moderator restores a released file from the admin, in Chromium; the owner gets it back (#29)."""

from __future__ import annotations

import json
import urllib.request

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from playwright.sync_api import expect

from attachments.models import TransitionLog
from tests.browser.conftest import sign_in
from tests.support import client_for, jpeg_bytes, run_pipeline, upload

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHANGELIST = "/admin/attachments/attachment/"


def _committed(owner, filename: str, ref: str) -> str:
    client = client_for(owner)
    pk = upload(client, jpeg_bytes((160, 120)), filename=filename)
    assert run_pipeline(pk) == "ready"
    assert client.post("/api/v1/attachments/commit", {"ids": [pk], "ref": ref}, format="json").status_code == 200
    return pk


def _release(owner, pk: str) -> None:
    response = client_for(owner).post("/api/v1/attachments/release", {"ids": [pk]}, format="json")
    assert response.status_code == 200, response.content


def _owner_get(live_server, owner, path: str) -> tuple[int, bytes]:
    """The owner's request to the running server, as the host application sends it."""
    request = urllib.request.Request(f"{live_server.url}{path}", headers={"Authorization": f"Token {owner.api_token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, response.read()


def test_a_tenant_moderator_restores_a_released_file(page, live_server, alice, make_user):
    gina = make_user("gina", tenant="globex")
    released = _committed(alice, "gone.jpg", "ad:42")
    _committed(alice, "kept.jpg", "ad:42")
    _release(alice, released)
    _release(gina, _committed(gina, "other-tenant.jpg", "ad:7"))
    call_command("createuser", "acme-mod", "--tenant", "acme", "--moderator", "--password", "pw-acme-mod")
    assert not get_user_model().objects.get(username="acme-mod").is_superuser

    sign_in(page, "acme-mod", next_url=CHANGELIST)
    page.locator("#changelist-filter").get_by_role("link", name="Released", exact=True).click()
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(1)  # not the committed file, not the other tenant's released one
    expect(rows.first).to_contain_text("gone.jpg")

    page.get_by_role("link", name="gone.jpg").click()
    page.click("a.airlock-action[data-action=restore_released]")
    expect(page.locator("h1")).to_contain_text("Restore released file")
    expect(page.locator(".airlock-confirmation")).to_contain_text("gone.jpg")
    page.get_by_role("button", name="Yes, restore released file").click()
    expect(page.locator(".messagelist")).to_contain_text("Restore released file: done for 1 attachment")
    expect(page.locator(".field-lifecycle .readonly")).to_have_text("Committed")
    expect(page.locator("a.airlock-action[data-action=restore_released]")).to_have_count(0)

    status, body = _owner_get(live_server, alice, f"/api/v1/attachments/{released}")
    assert status == 200 and json.loads(body)["lifecycle"] == "committed"
    status, data = _owner_get(live_server, alice, f"/api/v1/attachments/{released}/download")
    assert status == 200 and data[:3] == b"\xff\xd8\xff"  # the JPEG itself
    log = TransitionLog.objects.get(attachment_id=released, transition="restore")
    assert (log.from_status, log.to_status, log.actor) == ("released", "committed", "staff:acme-mod")
