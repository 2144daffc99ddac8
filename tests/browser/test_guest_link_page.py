"""A guest opens an upload link on a phone (390 x 844), with no cookie: uploads a PNG, sees it received, removes it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from attachments.links.services.upload_links import upload_link_create
from attachments.models import Attachment, Lifecycle, UploadLink
from tests.support import png_bytes

from .conftest import pick_files, upload_item

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def phone(chromium, live_server):
    context = chromium.new_context(
        base_url=live_server.url,
        viewport={"width": 390, "height": 844},
        device_scale_factor=3,
        is_mobile=True,
        has_touch=True,
    )
    context.set_default_timeout(30_000)
    yield context.new_page()
    context.close()


def test_a_guest_uploads_sees_it_received_and_removes_it(phone, live_worker, alice, tmp_path):
    link = upload_link_create(
        user=alice, ref="event:9", title="Anna & Ben", expires_at=timezone.now() + timedelta(days=1)
    )
    assert phone.context.cookies() == []
    phone.goto(f"/l/{link.pk}")
    expect(phone.locator("h1")).to_have_text("Anna & Ben")
    assert "moderation" not in phone.content().lower()
    assert phone.locator("#profile").is_hidden() and phone.locator("#commit").is_hidden()
    assert [c["name"] for c in phone.context.cookies()] == ["airlock_guest"]
    photo = tmp_path / "beach.png"
    photo.write_bytes(png_bytes((60, 40)))
    pick_files(phone, [str(photo)])
    item = upload_item(phone, "beach.png")
    expect(item).to_have_attribute("data-status", "ready", timeout=60_000)
    expect(item.locator(".status")).to_have_text("Received")
    row = Attachment.objects.get(upload_link=link)
    assert (row.lifecycle, row.ref) == (Lifecycle.COMMITTED, "event:9")
    item.locator("button.remove").click()
    expect(item).to_have_count(0)
    row.refresh_from_db()
    assert row.lifecycle == Lifecycle.RELEASED


def test_an_expired_links_page_says_so(phone, alice):
    link = upload_link_create(user=alice, ref="event:9", expires_at=timezone.now() + timedelta(days=1))
    UploadLink.objects.filter(pk=link.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    response = phone.goto(f"/l/{link.pk}")
    assert response.status == 410
    expect(phone.locator("#closed")).to_contain_text("has expired")


def test_a_photo_picked_while_the_profiles_are_still_loading_is_sent(phone, live_worker, alice, tmp_path, monkeypatch):
    """On a slow connection the page's profiles arrive late: the picker is there only once they have,
    so a photo chosen at the first chance is taken, not refused for want of a profile."""
    import time

    from attachments.api.views import ProfilesApi

    link = upload_link_create(user=alice, ref="event:9", expires_at=timezone.now() + timedelta(days=1))
    answer = ProfilesApi.get

    def late(self, request):
        time.sleep(3)  # a phone on a slow network: the profiles come after the page has drawn
        return answer(self, request)

    monkeypatch.setattr(ProfilesApi, "get", late)
    phone.goto(f"/l/{link.pk}")
    photo = tmp_path / "first.png"
    photo.write_bytes(png_bytes((60, 40)))
    pick_files(phone, [str(photo)])  # as soon as the picker exists
    item = upload_item(phone, "first.png")
    expect(item).to_have_attribute("data-status", "ready", timeout=60_000)
    assert Attachment.objects.filter(upload_link=link, filename="first.png").count() == 1
