"""Video and audio on the change page: a player gated like the staff previews, and the probe's facts."""

from __future__ import annotations

import logging
import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from attachments.models import Attachment
from attachments.services.moderation import attachment_take_down
from attachments.serving import served_object
from attachments.storage import get_gateway
from tests.corpus import corpus_dir
from tests.support import client_for, run_pipeline, upload

pytestmark = pytest.mark.django_db

GENERATED = corpus_dir() / "generated"


def _change(pk) -> str:
    return f"/admin/attachments/attachment/{pk}/change/"


def _media(pk) -> str:
    return f"/admin/attachments/attachment/{pk}/media/"


def _poster(pk) -> str:
    return f"/admin/attachments/attachment/{pk}/poster/"


def _body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def _processed(owner, name: str, content_type: str) -> str:
    pk = upload(
        client_for(owner), (GENERATED / name).read_bytes(), profile="media", filename=name, content_type=content_type
    )
    assert run_pipeline(pk) == "ready"
    return pk


@pytest.fixture
def ready_video(alice):
    return _processed(alice, "video_h264_aac.mp4", "video/mp4")


@pytest.fixture
def ready_audio(alice):
    return _processed(alice, "audio_aac.m4a", "audio/mp4")


def _facts(html: str) -> dict[str, str]:
    table = re.search(r'<table class="airlock-media-facts">(.*?)</table>', html, re.S)
    assert table, "no media facts table"
    return dict(re.findall(r'<th scope="row">(.*?)</th><td>(.*?)</td>', table.group(1)))


def test_a_ready_video_plays_with_its_poster_and_lists_its_probe_facts(moderator, ready_video, browser_for):
    html = browser_for(moderator).get(_change(ready_video)).content.decode()
    video = re.search(r"<video [^>]*>", html)
    assert video, "no <video> element"
    tag = video.group(0)
    assert " controls" in tag and 'preload="none"' in tag
    assert f'src="{_media(ready_video)}"' in tag and f'poster="{_poster(ready_video)}"' in tag
    assert _facts(html) == {
        "Duration": "0:02 (2 s)",
        "Container": "mov",
        "Dimensions": "64 × 48 px (as shown)",
        "Video codec": "h264",
        "Frame rate": "10 fps",
        "Rotation": "none",
        "Audio codec": "aac",
        "Audio channels": "2 (stereo)",
        "Sample rate": "48 kHz",
        "Bit rate": _facts(html)["Bit rate"],
        "Streams": "2",
    }
    assert re.fullmatch(r"\d+ kbit/s", _facts(html)["Bit rate"])
    assert "<fieldset" in html and ">Media</h2>" in html


def test_a_rotated_video_lists_its_rotation_and_shown_size(moderator, alice, browser_for):
    pk = _processed(alice, "video_rotated.mov", "video/quicktime")
    facts = _facts(browser_for(moderator).get(_change(pk)).content.decode())
    assert facts["Rotation"] == "90° clockwise" and facts["Dimensions"] == "48 × 64 px (as shown)"
    assert "Audio codec" not in facts


def test_audio_gets_an_audio_player_and_no_video_facts(moderator, ready_audio, browser_for):
    html = browser_for(moderator).get(_change(ready_audio)).content.decode()
    assert re.search(rf'<audio [^>]*controls preload="none" src="{_media(ready_audio)}"', html)
    assert "<video" not in html
    facts = _facts(html)
    assert facts["Audio codec"] == "aac" and facts["Streams"] == "1"
    assert facts["Duration"].startswith("0:02 (")  # 1.98 s of AAC (its priming) is shown as 0:02
    assert not {"Dimensions", "Video codec", "Frame rate", "Rotation"} & set(facts)


def test_the_player_source_is_the_served_file_with_ranges_and_the_serving_headers(
    moderator, ready_video, browser_for, caplog
):
    client = browser_for(moderator)
    # What download serves: the location-free stream copy the pipeline stored, not the upload.
    row = Attachment.objects.get(pk=ready_video)
    key, size = served_object(row)
    served = get_gateway().read_range(key, 0, size)
    assert key != row.storage_key and served != (GENERATED / "video_h264_aac.mp4").read_bytes()
    with caplog.at_level(logging.INFO, logger="airlock.admin"):
        whole = client.get(_media(ready_video))
        part = client.get(_media(ready_video), HTTP_RANGE="bytes=100-199")
    assert whole.status_code == 200 and _body(whole) == served
    assert whole["Content-Type"] == "video/mp4" and whole["Accept-Ranges"] == "bytes"
    assert whole["Content-Disposition"].startswith("inline;")
    assert whole["X-Content-Type-Options"] == "nosniff"
    assert whole["Content-Security-Policy"] == "default-src 'none'; sandbox"
    assert part.status_code == 206 and _body(part) == served[100:200]
    assert part["Content-Range"] == f"bytes 100-199/{len(served)}"
    # One line per playback (its first request), with who watched; a seek adds none.
    plays = [r for r in caplog.records if r.getMessage() == "staff media playback"]
    assert [(r.actor, r.attachment_id) for r in plays] == [("staff:mod", str(ready_video))]
    poster = client.get(_poster(ready_video))
    assert poster.status_code == 200 and poster["Content-Type"] == "image/webp"
    assert _body(poster)[8:12] == b"WEBP"


def test_a_taken_down_video_still_plays_for_the_moderator_who_may_restore_it(moderator, ready_video, browser_for):
    attachment_take_down(attachment_id=ready_video, actor="staff:mod", note="review")
    client = browser_for(moderator)
    assert client.get(_media(ready_video)).status_code == 200
    assert "<video " in client.get(_change(ready_video)).content.decode()


def test_no_player_for_what_is_not_a_playable_ready_media_file(moderator, alice, ready_video, ready_image, browser_for):
    client = browser_for(moderator)
    # A photo: its thumbnail, no player, no media facts.
    html = client.get(_change(ready_image)).content.decode()
    assert "<video" not in html and "airlock-media-facts" not in html and 'class="airlock-thumb"' in html
    assert client.get(_media(ready_image)).status_code == 404
    # Rejected by the probe (never passed the sandbox): nothing to play.
    bad = upload(
        client_for(alice),
        (GENERATED / "video_4_hours.mp4").read_bytes(),
        profile="media",
        filename="long.mp4",
        content_type="video/mp4",
    )
    assert run_pipeline(bad) == "rejected"
    assert client.get(_media(bad)).status_code == 404
    assert "<video" not in client.get(_change(bad)).content.decode()
    # Deleted: gone from the console's player too.
    Attachment.objects.filter(pk=ready_video).update(lifecycle="deleted")
    assert client.get(_media(ready_video)).status_code == 404
    assert client.get(_poster(ready_video)).status_code == 404


def test_the_player_source_is_gated_like_the_staff_previews(viewer, make_user, ready_video, browser_for):
    # View permission is enough to watch (as for the thumbnail); none, or no staff, is refused.
    assert browser_for(viewer).get(_media(ready_video)).status_code == 200
    intern = make_user("intern", tenant="staff", staff=True)
    assert browser_for(intern).get(_media(ready_video)).status_code == 403
    owner_session = browser_for(Attachment.objects.get(pk=ready_video).owner)
    assert owner_session.get(_media(ready_video)).status_code == 302  # to the admin login: not staff
    # A moderator of another tenant does not see it at all.
    call_command("createuser", "globex-mod", "--tenant", "globex", "--moderator", "--password", "pw-x")
    other = get_user_model().objects.get(username="globex-mod")
    assert browser_for(other).get(_media(ready_video)).status_code == 404
    assert browser_for(other).get(_poster(ready_video)).status_code == 404
