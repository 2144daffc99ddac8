"""A moderator plays a ready video on its change page, in Chromium, from the staff-only media endpoint."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import sign_in
from tests.corpus import corpus_dir
from tests.support import client_for, upload, wait_for_status

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Plays a little, muted (headless Chromium lets muted media play without a gesture), then pauses:
# what the element itself reports, not what the page's HTML says.
PLAY_A_LITTLE = """async (video) => {
  video.muted = true;
  await video.play();
  const deadline = Date.now() + 15000;
  while (video.currentTime < 0.3 && Date.now() < deadline) await new Promise(r => setTimeout(r, 50));
  video.pause();
  return {readyState: video.readyState, duration: video.duration, currentTime: video.currentTime,
          error: video.error && video.error.code, width: video.videoWidth, height: video.videoHeight};
}"""


@pytest.mark.parametrize(
    ("name", "content_type"),
    [
        ("video_h264_aac.mp4", "video/mp4"),  # moov at the end: the player needs Range requests to reach it
        ("video_vp9_opus.webm", "video/webm"),
    ],
)
def test_a_moderator_plays_a_ready_video(page, live_server, live_worker, alice, moderator, name, content_type):
    data = (corpus_dir() / "generated" / name).read_bytes()
    attachment_id = upload(client_for(alice), data, profile="media", filename=name, content_type=content_type)
    assert wait_for_status(attachment_id, timeout=60) == "ready"

    change = f"/admin/attachments/attachment/{attachment_id}/change/"
    sign_in(page, "mod", next_url=change)
    page.wait_for_url(f"{live_server.url}{change}")
    video = page.locator(".field-preview video")
    expect(video).to_have_count(1)
    assert video.get_attribute("preload") == "none"
    assert page.evaluate(f"document.createElement('video').canPlayType({content_type!r})") != ""

    # The poster is the staff poster endpoint's WebP, shown before anything plays.
    poster = video.get_attribute("poster")
    assert poster == f"/admin/attachments/attachment/{attachment_id}/poster/"
    answer = page.evaluate("url => fetch(url).then(r => [r.status, r.headers.get('content-type')])", poster)
    assert answer == [200, "image/webp"]

    state = video.evaluate(PLAY_A_LITTLE)
    assert state["error"] is None, state
    assert state["readyState"] >= 1, state  # HAVE_METADATA at least
    assert 1.9 <= state["duration"] <= 2.1, state
    assert state["currentTime"] >= 0.3, state
    assert (state["width"], state["height"]) == (64, 48), state

    facts = page.locator(".airlock-media-facts")
    expect(facts).to_contain_text("0:02")
    expect(facts).to_contain_text("64 × 48 px")
