"""Every admin page at a laptop's 1280 px and a phone's 390 px, and the upload page guests reach from a
QR code, in Chromium (#32 "Responsive"): the page never scrolls sideways and its controls are in view.

A table wider than a phone (a changelist's columns) scrolls inside its own box; the page does not.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import open_upload_page, pick_files, sign_in, upload_item
from tests.support import client_for, jpeg_bytes, run_pipeline, upload

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = [1280, 390]


def _overflow(page) -> list[int]:
    return page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")


def _inside(page, selector: str, width: int) -> None:
    """The control is shown and lies within the viewport's width (scrolled to, not clipped sideways)."""
    control = page.locator(selector).first
    expect(control).to_be_visible()
    control.scroll_into_view_if_needed()
    box = control.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5, (selector, box)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_upload_page_fits_and_says_what_to_do_about_a_refusal(page, live_server, live_worker, alice, width):
    page.set_viewport_size({"width": width, "height": 844})
    open_upload_page(page, live_server, "alice")
    assert _overflow(page)[0] <= _overflow(page)[1], _overflow(page)
    for control in ("#profile", "#dashboard .uppy-Dashboard-browse", "#ref", "#commit"):
        _inside(page, control, width)

    pick_files(
        page,
        [
            {
                "name": "IMG_20260614_wedding-reception-first-dance.jpg",
                "mimeType": "image/jpeg",
                "buffer": jpeg_bytes((320, 240)),
            },
            {"name": "invitation.jpg", "mimeType": "image/jpeg", "buffer": b"MZ not a picture whatever it says" * 4},
        ],
    )
    photo, refused = (
        upload_item(page, "IMG_20260614_wedding-reception-first-dance.jpg"),
        upload_item(page, "invitation.jpg"),
    )
    expect(photo).to_have_attribute("data-status", "ready", timeout=60_000)
    expect(refused).to_have_attribute("data-status", "rejected", timeout=60_000)
    # A decision about the content: no Retry, and a sentence saying what to do instead.
    expect(refused.locator("button.retry")).to_be_hidden()
    expect(refused.locator(".advice")).to_have_text(
        "This kind of file is not accepted here: the picker lists the types that are."
    )
    expect(photo.locator(".advice")).to_be_hidden()
    assert _overflow(page)[0] <= _overflow(page)[1], _overflow(page)
    for control in ("#items li.item .remove", "#commit"):
        _inside(page, control, width)


@pytest.fixture
def staff_pages(page, alice, make_user):
    """Sign a superuser in: the admin index's links are then every admin page there is."""
    root = make_user("root", tenant="staff", staff=True)
    root.is_superuser = True
    root.save()
    pk = upload(client_for(alice), jpeg_bytes((64, 48)), filename="IMG_2026-06-14_wedding-smith-family-portrait.jpg")
    assert run_pipeline(pk) == "ready"
    sign_in(page, "root")
    links = page.eval_on_selector_all("#content a", "as => as.map(a => a.getAttribute('href'))")
    listed = sorted({href for href in links if href and href.startswith("/admin/") and "?" not in href})
    assert "/admin/attachments/attachment/" in listed and "/admin/dashboard/" in listed, listed
    return [*listed, f"/admin/attachments/attachment/{pk}/change/", "/admin/"]


@pytest.mark.parametrize("width", WIDTHS)
def test_every_admin_page_fits(page, staff_pages, width):
    page.set_viewport_size({"width": width, "height": 900})
    wide = []
    for url in staff_pages:
        page.goto(url)
        expect(page.locator("#content")).to_be_visible()
        scroll, client = _overflow(page)
        if scroll > client:
            wide.append((url, scroll, client))
        # The header's way out and the page's title stay in view at either width.
        _inside(page, "#user-tools a[href='/admin/password_change/'], #logout-form button", width)
        _inside(page, "#content h1, #content h2", width)
    assert wide == [], wide
