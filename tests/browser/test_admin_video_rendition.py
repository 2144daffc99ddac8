"""An iPhone's HEVC video, which Chromium cannot decode, plays in the console through its web rendition."""

import time

import pytest
from playwright.sync_api import expect

from attachments.models import Attachment
from tests.browser.conftest import sign_in
from tests.browser.test_admin_video import PLAY_A_LITTLE
from tests.corpus import corpus_dir
from tests.support import client_for, upload, wait_for_status

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NAME = "video_hevc_location_rotated.mov"


def _wait_for_rendition(attachment_id, timeout: float = 90.0) -> dict:
    deadline = time.monotonic() + timeout
    state: dict = {}
    while time.monotonic() < deadline:
        state = Attachment.objects.get(pk=attachment_id).metadata.get("renditions", {}).get("web", {})
        if state.get("status") in ("ready", "failed"):
            return state
        time.sleep(0.1)
    raise AssertionError(f"web rendition still {state.get('status')} after {timeout}s")


def test_an_hevc_video_plays_in_the_console_through_its_web_rendition(page, live_server, live_worker, alice, moderator):
    # Chromium here has no HEVC decoder: the file as served would play its sound over a blank frame.
    assert page.evaluate("document.createElement('video').canPlayType('video/mp4; codecs=\"hvc1\"')") == ""
    data = (corpus_dir() / "generated" / NAME).read_bytes()
    attachment_id = upload(client_for(alice), data, profile="media", filename=NAME, content_type="video/quicktime")
    assert wait_for_status(attachment_id, timeout=60) == "ready"
    assert _wait_for_rendition(attachment_id)["status"] == "ready"

    change = f"/admin/attachments/attachment/{attachment_id}/change/"
    sign_in(page, "mod", next_url=change)
    page.wait_for_url(f"{live_server.url}{change}")
    video = page.locator(".field-preview video")
    expect(video).to_have_count(1)
    state = video.evaluate(PLAY_A_LITTLE)
    assert state["error"] is None, state
    assert state["currentTime"] >= 0.3, state
    assert (state["width"], state["height"]) == (48, 64), state  # decoded, and upright
