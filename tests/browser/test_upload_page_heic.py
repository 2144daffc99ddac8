"""The upload page with a phone photo: a HEIC the browser gives no type shows its thumbnail."""

import pytest
from playwright.sync_api import expect

from tests.corpus import corpus_dir

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_heic_photo_shows_its_thumbnail(page, live_server, live_worker, alice):
    page.goto("/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "pw-alice")
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    expect(page.locator("#profile")).to_be_enabled()
    page.select_option("#profile", "image")
    assert "image/heic" in page.get_attribute("#files", "accept")

    # No type given: Chromium infers image/heic from the name (checked: the page needs no fallback).
    data = (corpus_dir() / "generated" / "heic_gps_rotated.heic").read_bytes()
    page.set_input_files("#files", [{"name": "IMG_0001.HEIC", "mimeType": "", "buffer": data}])
    item = page.locator("#items li.item").filter(has=page.locator(".name", has_text="IMG_0001.HEIC"))
    expect(item).to_have_attribute("data-status", "ready", timeout=60_000)
    thumb = item.locator(".thumb img")
    expect(thumb).to_be_visible()
    page.wait_for_function("el => el.naturalWidth > 0", arg=thumb.element_handle())
    # Oriented: portrait, as the photo is displayed.
    size = page.evaluate("el => [el.naturalWidth, el.naturalHeight]", thumb.element_handle())
    assert size == [192, 256]
