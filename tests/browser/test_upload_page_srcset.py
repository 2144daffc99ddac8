"""The upload page's thumbnails on a dense screen: the browser takes a variant from the srcset, made on request."""

import pytest
from playwright.sync_api import expect

from attachments.models import Derivative
from tests.browser.conftest import open_upload_page, pick_files, upload_item, watch_csp
from tests.support import jpeg_bytes

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_dense_screen_loads_the_small_variant(page_at, live_server, live_worker, alice):
    page = page_at(4)  # a 4× screen: the 72 px box needs 288 px, more than the 256 px thumbnail has
    violations = watch_csp(page)
    images: list[str] = []
    page.on("request", lambda r: images.append(r.url) if r.resource_type == "image" else None)
    open_upload_page(page, live_server, "alice")
    pick_files(page, [{"name": "wide.jpg", "mimeType": "image/jpeg", "buffer": jpeg_bytes((3000, 2000))}])
    item = upload_item(page, "wide.jpg")
    expect(item).to_have_attribute("data-status", "ready", timeout=60_000)
    thumb = item.locator(".thumb img")
    expect(thumb).to_be_visible()
    page.wait_for_function("el => el.complete && el.naturalWidth > 0", arg=thumb.element_handle(), timeout=60_000)
    chosen = page.evaluate("el => el.currentSrc", thumb.element_handle())
    assert "/variants/small?" in chosen, chosen
    assert any("/variants/small?" in url for url in images)
    assert not any("/variants/medium?" in url or "/variants/large?" in url for url in images)
    assert Derivative.objects.filter(kind="variant:small:webp").count() == 1  # WebP: the browser's Accept
    assert violations == []
