"""The console at a laptop's 1280 px and a phone's 390 px (#32 "Responsive"), and its banner, in Chromium."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from attachments.models import Attachment
from ops import banner as admin_banner
from sweeper.control import sweeper_control_set
from tests.browser.conftest import sign_in
from tests.support import client_for, jpeg_bytes, run_pipeline, upload

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHANGELIST = "/admin/attachments/attachment/"


@pytest.fixture
def listed(alice, moderator):
    """Rows with the long names and refs real tickets bring."""
    moderator.set_password("pw-mod")
    moderator.save()
    for i in range(4):
        name = f"IMG_2026-06-1{i}_wedding-reception-smith-family-{i:03d}.jpg"
        pk = upload(client_for(alice), jpeg_bytes((60 + i, 40)), filename=name)
        assert run_pipeline(pk) == "ready"
        Attachment.objects.filter(pk=pk).update(ref=f"wedding:smith-2026:album-{i}")
    refused = upload(client_for(alice), b"MZ no picture at all" * 8, filename="not-a-photo-at-all-really.jpg")
    assert run_pipeline(refused) == "rejected"  # its status column carries the reason code too


def _measure(page) -> dict:
    return page.evaluate("""() => {
        const table = document.querySelector('#result_list');
        const box = table.parentElement;
        const created = document.querySelector('#result_list th.column-created');
        const c = created.getBoundingClientRect(), b = box.getBoundingClientRect();
        return {table: table.scrollWidth, box: box.clientWidth,
                createdInside: c.right <= b.right + 1 && c.width > 0,
                cols: [...document.querySelectorAll('#result_list thead th')]
                    .map(t => t.className + ':' + Math.round(t.getBoundingClientRect().width)).join(' '),
                doc: document.documentElement.scrollWidth, viewport: document.documentElement.clientWidth};
    }""")


def test_the_list_fits_at_1280_px_with_the_created_column_visible(page, listed):
    page.set_viewport_size({"width": 1280, "height": 900})
    sign_in(page, "mod", next_url=CHANGELIST)
    expect(page.locator("#result_list tbody tr")).to_have_count(5)
    m = _measure(page)
    assert m["table"] <= m["box"], m
    assert m["createdInside"], m
    expect(page.locator("#result_list th.column-created")).to_be_in_viewport()


def test_the_list_is_usable_on_a_phone(page, listed):
    page.set_viewport_size({"width": 390, "height": 844})
    sign_in(page, "mod", next_url=CHANGELIST)
    expect(page.locator("#result_list tbody tr")).to_have_count(5)
    m = _measure(page)
    assert m["doc"] <= m["viewport"], m  # the page itself never scrolls sideways
    page.fill("#searchbar", "ref:wedding:smith-2026:album-2")
    page.press("#searchbar", "Enter")
    expect(page.locator("#result_list tbody tr")).to_have_count(1)


def test_the_banner_shows_on_admin_pages(page, moderator, settings, monkeypatch):
    monkeypatch.setattr(admin_banner, "CACHE_SECONDS", 0)
    settings.AIRLOCK_SWEEPER_KILLSWITCH = None
    settings.AIRLOCK_SWEEPER_DRY_RUN = None
    moderator.set_password("pw-mod")
    moderator.save()
    sweeper_control_set(killswitch=True, actor="staff:ops")
    sign_in(page, "mod", next_url=CHANGELIST)
    banner = page.locator("#airlock-banner li[data-kind=brake]")
    expect(banner).to_contain_text("killswitch is on")
    banner.get_by_role("link", name="Fix it here").click()
    expect(page).to_have_url(re.compile(r"/admin/sweeper/sweepercontrol/"))  # the one row of brakes


@pytest.mark.parametrize("width", [1280, 390])
def test_a_files_page_never_scrolls_sideways(page, listed, width):
    pk = Attachment.objects.filter(status="ready").values_list("pk", flat=True).first()
    page.set_viewport_size({"width": width, "height": 900})
    sign_in(page, "mod", next_url=f"{CHANGELIST}{pk}/change/")
    expect(page.locator("#airlock-summary")).to_contain_text("Ready")
    overflow = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert overflow[0] <= overflow[1], overflow
