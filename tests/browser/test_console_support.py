"""A support person's ticket, in Chromium at a laptop's 1280 px and a phone's 390 px (#32 "Prove it").

"My wedding video isn't showing": find the file by its ref in one search, play it,
download it (audited with the staff member as the actor), and see the banner when the
backlog check pauses uploads. Every page on the way fits its width (no sideways scroll)
with the controls in view.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from attachments.models import Attachment, TransitionLog
from attachments.services import backlog
from attachments.services.audit import STAFF_DOWNLOAD
from ops import banner
from tests.browser.conftest import sign_in
from tests.browser.test_admin_video import PLAY_A_LITTLE
from tests.corpus import corpus_dir
from tests.support import client_for, jpeg_bytes, run_pipeline, upload

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHANGELIST = "/admin/attachments/attachment/"
WIDTHS = [1280, 390]


def _fits(page) -> None:
    """The page never scrolls sideways: what a 1280 px laptop or a 390 px phone shows is all there is."""
    widths = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1], widths


def _overlap(a: dict, b: dict) -> bool:
    return not (
        a["x"] + a["width"] <= b["x"]
        or b["x"] + b["width"] <= a["x"]
        or a["y"] + a["height"] <= b["y"]
        or b["y"] + b["height"] <= a["y"]
    )


@pytest.fixture
def ticket(alice, moderator, settings, monkeypatch):
    """The smiths' wedding video among other files with refs, and a signed-in-able support person."""
    monkeypatch.setattr(banner, "CACHE_SECONDS", 0)
    moderator.set_password("pw-mod")
    moderator.save()
    name = "video_h264_aac.mp4"
    video = upload(
        client_for(alice),
        (corpus_dir() / "generated" / name).read_bytes(),
        profile="media",
        filename="first-dance.mp4",
        content_type="video/mp4",
    )
    assert run_pipeline(video) == "ready"
    Attachment.objects.filter(pk=video).update(ref="wedding:smith-2026")
    for i, ref in enumerate(("wedding:jones-2025", "ad:42", "wedding:smithers-2024")):
        pk = upload(client_for(alice), jpeg_bytes((50 + i, 40)), filename=f"other-{i}.jpg")
        assert run_pipeline(pk) == "ready"
        Attachment.objects.filter(pk=pk).update(ref=ref)
    return video


@pytest.mark.parametrize("width", WIDTHS)
def test_support_finds_plays_and_downloads_the_wedding_video(page, ticket, width):
    page.set_viewport_size({"width": width, "height": 900})
    sign_in(page, "mod", next_url=CHANGELIST)
    search = page.locator("#searchbar")
    expect(search).to_be_in_viewport()
    _fits(page)

    search.fill("ref:wedding:smith-2026")  # one search, the ref the ticket names
    search.press("Enter")
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(1)
    link = rows.first.locator("th.field-filename a")
    expect(link).to_have_text("first-dance.mp4")
    _fits(page)
    link.click()

    expect(page.locator("#airlock-summary")).to_contain_text("Ready")
    video = page.locator(".field-preview video")
    video.scroll_into_view_if_needed()
    expect(video).to_be_in_viewport()
    box = video.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, box
    state = video.evaluate(PLAY_A_LITTLE)
    assert state["error"] is None and state["currentTime"] >= 0.3, state
    _fits(page)

    button = page.locator("#airlock-download")
    button.scroll_into_view_if_needed()
    expect(button).to_be_in_viewport()
    for tool in page.locator(".object-tools a").all():  # no tool covers the file's title
        assert not _overlap(tool.bounding_box(), page.locator("#content h2").first.bounding_box())
    with page.expect_download() as caught:
        button.click()
    download = caught.value
    assert download.suggested_filename == "first-dance.mp4"
    served = Attachment.objects.get(pk=ticket)
    with open(download.path(), "rb") as fh:
        assert len(fh.read()) == served.size
    [entry] = TransitionLog.objects.filter(attachment_id=ticket, transition=STAFF_DOWNLOAD)
    assert entry.actor == "staff:mod" and entry.details["size"] == served.size


@pytest.mark.parametrize("width", WIDTHS)
def test_support_sees_paused_uploads_when_the_backlog_check_trips(page, ticket, acme_behind, width):
    page.set_viewport_size({"width": width, "height": 900})
    sign_in(page, "mod", next_url=CHANGELIST)
    banner = page.locator("#airlock-banner li[data-kind=uploads_paused]")
    expect(banner).to_contain_text("New uploads are paused for tenant acme")
    expect(banner).to_be_in_viewport()
    _fits(page)
    banner.get_by_role("link").first.click()
    expect(page).to_have_url(re.compile(r"\?question=late&tenant__id__exact=\d+$"))
    expect(page.locator("#result_list tbody tr")).to_have_count(backlog.QUEUE_DEPTH)
    _fits(page)
