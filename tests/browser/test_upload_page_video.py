"""The upload page with a phone video: once ready it shows the poster frame, the video's length and a player
that plays what every browser decodes (the web rendition once it is made, else the file as served)."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import open_upload_page, pick_files, upload_item, watch_csp
from tests.browser.test_admin_video import PLAY_A_LITTLE
from tests.browser.test_admin_video_rendition import NAME as HEVC_NAME
from tests.corpus import corpus_dir

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_ready_video_shows_its_poster_and_duration(page, live_server, live_worker, alice):
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    open_upload_page(page, live_server, "alice", "media")
    assert "video/mp4" in page.get_attribute("#dashboard input.uppy-Dashboard-input >> nth=0", "accept")

    data = (corpus_dir() / "generated" / "video_rotated.mov").read_bytes()
    pick_files(page, [{"name": "IMG_0002.MOV", "mimeType": "video/quicktime", "buffer": data}])
    item = upload_item(page, "IMG_0002.MOV")
    expect(item).to_have_attribute("data-status", "ready", timeout=60_000)
    attachment_id = item.get_attribute("data-id")

    poster = item.locator(".thumb img")
    expect(poster).to_have_attribute("data-kind", "poster")
    page.wait_for_function("el => el.naturalWidth > 0", arg=poster.element_handle())
    # The poster as shown: the 64x48 clip turned upright by its display matrix.
    assert page.evaluate("el => [el.naturalWidth, el.naturalHeight]", poster.element_handle()) == [48, 64]
    assert any(url.split("?")[0].endswith(f"/api/v1/attachments/{attachment_id}/poster") for url in requested), (
        requested
    )
    assert not any(url.split("?")[0].endswith(f"/api/v1/attachments/{attachment_id}/thumbnail") for url in requested)

    expect(item.locator(".thumb .duration")).to_have_text("0:02")
    expect(item.locator(".line")).to_contain_text("0:02")
    expect(item.locator(".line")).to_contain_text("48×64")


def _path(url: str) -> str:
    return url.split("?")[0]


def test_a_video_that_plays_everywhere_plays_as_served(page, live_server, live_worker, alice):
    violations = watch_csp(page)
    open_upload_page(page, live_server, "alice", "media")
    data = (corpus_dir() / "generated" / "video_rotated.mov").read_bytes()  # H.264: no rendition needed
    pick_files(page, [{"name": "IMG_0003.MOV", "mimeType": "video/quicktime", "buffer": data}])
    item = upload_item(page, "IMG_0003.MOV")
    expect(item).to_have_attribute("data-status", "ready", timeout=60_000)
    attachment_id = item.get_attribute("data-id")

    player = item.locator("video.player")
    expect(player).to_have_attribute("data-source", "download")
    assert _path(player.get_attribute("src")).endswith(f"/api/v1/attachments/{attachment_id}/download")
    assert _path(player.get_attribute("poster")).endswith(f"/api/v1/attachments/{attachment_id}/poster")
    state = player.evaluate(PLAY_A_LITTLE)
    assert state["error"] is None and state["currentTime"] >= 0.3, state
    assert (state["width"], state["height"]) == (48, 64), state  # decoded, and upright
    assert violations == []


def test_an_hevc_clip_plays_through_its_web_rendition_once_it_is_ready(page, live_server, live_worker, alice):
    # Chromium here has no HEVC decoder: the file as served plays its sound over a blank frame.
    assert page.evaluate("document.createElement('video').canPlayType('video/mp4; codecs=\"hvc1\"')") == ""
    violations = watch_csp(page)
    open_upload_page(page, live_server, "alice", "media")
    data = (corpus_dir() / "generated" / HEVC_NAME).read_bytes()
    pick_files(page, [{"name": "IMG_0004.MOV", "mimeType": "video/quicktime", "buffer": data}])
    item = upload_item(page, "IMG_0004.MOV")
    expect(item).to_have_attribute("data-status", "ready", timeout=60_000)
    attachment_id = item.get_attribute("data-id")

    # The page reads the file again until its rendition is made, then the player switches to it.
    player = item.locator("video.player")
    expect(player).to_have_attribute("data-source", "web", timeout=120_000)
    assert _path(player.get_attribute("src")).endswith(f"/api/v1/attachments/{attachment_id}/web")
    expect(item.locator(".player-note")).to_have_text("")
    state = player.evaluate(PLAY_A_LITTLE)
    assert state["error"] is None, state
    assert state["currentTime"] >= 0.3, state
    assert state["width"] > 0 and (state["width"], state["height"]) == (48, 64), state  # decoded, upright
    assert violations == []


def test_audio_shows_its_duration_and_no_picture(page, live_server, live_worker, alice):
    open_upload_page(page, live_server, "alice", "media")
    data = (corpus_dir() / "generated" / "audio_aac.m4a").read_bytes()
    pick_files(page, [{"name": "memo.m4a", "mimeType": "audio/mp4", "buffer": data}])
    item = upload_item(page, "memo.m4a")
    expect(item).to_have_attribute("data-status", "ready", timeout=60_000)
    expect(item.locator(".line")).to_contain_text("0:02")
    expect(item.locator(".thumb img")).to_have_count(0)
    expect(item.locator("video")).to_have_count(0)
