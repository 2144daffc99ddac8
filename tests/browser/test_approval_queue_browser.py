"""A tenant's moderator works through an upload link's approval queue in Chromium, on a phone (390 × 844) and a
laptop (1280 px): the grid shows every waiting file's thumbnail, two are approved and one declined at once, and
no page scrolls sideways.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from attachments.models import Approval, Attachment, Lifecycle, TransitionLog, UploadLink
from tests.browser.conftest import sign_in
from tests.corpus import corpus_dir
from tests.support import client_for, jpeg_bytes, make_staff, run_pipeline, upload

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SIZES = [(390, 844), (1280, 900)]


def _fits(page) -> None:
    scroll, client = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert scroll <= client, (page.url, scroll, client)


def _inside(page, selector: str, width: int) -> None:
    control = page.locator(selector).first
    expect(control).to_be_visible()
    control.scroll_into_view_if_needed()
    box = control.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5, (selector, box)


@pytest.fixture
def waiting(alice):
    """alice's wedding link asking for approval, with three photos and a video from a guest, processed."""
    now = timezone.now()
    link = UploadLink.objects.create(
        tenant_id=alice.membership.tenant_id,
        user=alice,
        ref="wedding:anna-ben",
        title="Anna & Ben — the guests' pictures, from the church to the last dance",
        requires_approval=True,
        created_at=now,
        expires_at=now + timedelta(days=7),
    )
    sent = [
        ("IMG_20260614_181502_first-dance-under-the-lights.jpg", jpeg_bytes((640, 480)), "image", "image/jpeg"),
        ("cake.jpg", jpeg_bytes((480, 640), color=(30, 120, 200)), "image", "image/jpeg"),
        ("blurry.jpg", jpeg_bytes((320, 240), color=(90, 90, 90)), "image", "image/jpeg"),
        ("toast.mp4", (corpus_dir() / "generated" / "video_h264_aac.mp4").read_bytes(), "media", "video/mp4"),
    ]
    ids = {}
    for filename, data, profile, content_type in sent:
        pk = upload(client_for(alice), data, profile=profile, filename=filename, content_type=content_type)
        Attachment.objects.filter(pk=pk).update(upload_link=link, approval=Approval.PENDING, subject="guest-7")
        assert run_pipeline(pk) == "ready"
        ids[filename] = pk
    return link, ids


def _tile(page, pk):
    return page.locator(f'li.airlock-tile[data-id="{pk}"]')


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}px")
def test_a_moderator_approves_two_and_declines_one_from_the_grid(page, waiting, size):
    width, height = size
    link, ids = waiting
    make_staff("acme-mod")
    page.set_viewport_size({"width": width, "height": height})
    sign_in(page, "acme-mod")
    # From the admin's home to the queue, as a moderator finds it.
    page.click("#airlock-approval-link")
    _fits(page)
    page.click(f'#airlock-link-queues a[data-link="{link.pk}"]')
    expect(page.locator("#airlock-waiting")).to_have_text("4")
    tiles = page.locator("li.airlock-tile")
    expect(tiles).to_have_count(4)
    # Every tile shows its sandbox-made thumbnail (decoded, not a broken image), the video its play mark.
    for pk in ids.values():
        image = _tile(page, pk).locator("img")
        image.scroll_into_view_if_needed()
        expect(image).to_be_visible()
        page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=image.element_handle())
    expect(_tile(page, ids["toast.mp4"]).locator(".airlock-tile-badge")).to_contain_text("0:0")
    # Two columns at least on a phone: a queue of a thousand files is not a single file of tiles.
    first, second = (tiles.nth(i).bounding_box() for i in (0, 1))
    assert first is not None and second is not None and second["x"] > first["x"] and second["y"] == first["y"]
    expect(page.locator("#airlock-approve")).to_be_disabled()  # nothing chosen yet
    _fits(page)
    for control in ("#airlock-approve", "#airlock-decline", "#airlock-select-all"):
        _inside(page, control, width)

    photos = [ids["IMG_20260614_181502_first-dance-under-the-lights.jpg"], ids["cake.jpg"]]
    for pk in photos:
        _tile(page, pk).locator("label").click()  # the whole tile is the target, thumb-sized
    expect(page.locator("#airlock-selected")).to_have_text("2 of 4 selected")
    page.locator("#airlock-approve").click()
    expect(page.locator(".messagelist .success")).to_have_text("Approved 2 file(s).")
    expect(tiles).to_have_count(2)
    _fits(page)

    _tile(page, ids["blurry.jpg"]).locator("label").click()
    page.locator("#airlock-decline").click()
    expect(page.locator("#airlock-decline-confirm")).to_have_value("Yes, decline 1 file")
    expect(page.locator("li.airlock-tile")).to_have_count(1)
    _fits(page)
    _inside(page, "#airlock-decline-confirm", width)
    page.locator("#airlock-decline-confirm").click()
    expect(page.locator(".messagelist .success")).to_have_text("Declined 1 file(s).")
    expect(tiles).to_have_count(1)
    expect(_tile(page, ids["toast.mp4"])).to_be_visible()
    _fits(page)

    for pk in photos:
        row = Attachment.objects.get(pk=pk)
        assert (row.approval, row.lifecycle, row.ref) == (Approval.APPROVED, Lifecycle.COMMITTED, "wedding:anna-ben")
    declined = Attachment.objects.get(pk=ids["blurry.jpg"])
    assert (declined.approval, declined.lifecycle) == (Approval.DECLINED, Lifecycle.DISCARDED)
    decisions = TransitionLog.objects.filter(transition__in=("approve", "decline")).values_list("transition", "actor")
    assert sorted(decisions) == [
        ("approve", "staff:acme-mod"),
        ("approve", "staff:acme-mod"),
        ("decline", "staff:acme-mod"),
    ]
    # The UploadLink list shows what is left, and the file's page its decision in the timeline.
    page.goto("/admin/attachments/uploadlink/")
    expect(page.locator("a.airlock-link-queue")).to_have_text("1 waiting")
    _fits(page)
    page.goto(f"/admin/attachments/attachment/{ids['blurry.jpg']}/change/")
    expect(page.locator(".airlock-timeline-last")).to_contain_text("staff:acme-mod")
    _fits(page)
