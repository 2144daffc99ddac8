"""The upload page with a phone photo: a HEIC the browser gives no type shows its thumbnail."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import open_upload_page, pick_files, upload_item
from tests.corpus import corpus_dir

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_heic_photo_shows_its_thumbnail(page, live_server, live_worker, alice):
    open_upload_page(page, live_server, "alice")  # by file type
    assert "image/heic" in page.evaluate("window.airlock.uppy().opts.restrictions.allowedFileTypes")

    # No type given: the type comes from the name (Chromium, or Uppy's own table): image, by its type.
    data = (corpus_dir() / "generated" / "heic_gps_rotated.heic").read_bytes()
    pick_files(page, [{"name": "IMG_0001.HEIC", "mimeType": "", "buffer": data}])
    item = upload_item(page, "IMG_0001.HEIC")
    expect(item).to_have_attribute("data-status", "ready", timeout=60_000)
    expect(item.locator(".meta").first).to_contain_text("image")
    thumb = item.locator(".thumb img")
    expect(thumb).to_be_visible()
    page.wait_for_function("el => el.naturalWidth > 0", arg=thumb.element_handle())
    # Oriented: portrait, as the photo is displayed (the srcset's density scales both sides alike).
    width, height = page.evaluate("el => [el.naturalWidth, el.naturalHeight]", thumb.element_handle())
    assert width * 4 == height * 3
