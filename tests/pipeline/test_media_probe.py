"""Videos and audio of the media profile: probed in the sandbox, bounded from the headers, a poster frame.

Every file is made by tests/corpus/make_media.py and goes through the whole pipeline
(upload, intake, scan, the sandboxed derive step); what is checked is what the API
answers and serves.
"""

from __future__ import annotations

import io
import time

import pytest
from PIL import Image

from attachments.models import Attachment
from tests.corpus import corpus_dir
from tests.support import run_pipeline, upload

pytestmark = pytest.mark.django_db

GENERATED = corpus_dir() / "generated"
RED, BLUE = (255, 0, 0), (0, 0, 255)


def _body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def _near(pixel: tuple[int, ...], color: tuple[int, int, int], tolerance: int = 60) -> bool:
    return all(abs(a - b) <= tolerance for a, b in zip(pixel, color))


def _processed(client, name: str, content_type: str) -> tuple[str, Attachment]:
    data = (GENERATED / name).read_bytes()
    attachment_id = upload(client, data, profile="media", filename=name, content_type=content_type)
    status = run_pipeline(attachment_id)
    return status, Attachment.objects.get(pk=attachment_id)


@pytest.mark.parametrize(
    ("name", "content_type", "expected"),
    [
        (
            "video_h264_aac.mp4",
            "video/mp4",
            {
                "container": "mov",
                "width": 64,
                "height": 48,
                "rotation": 0,
                "video_codec": "h264",
                "frame_rate": 10.0,
                "audio_codec": "aac",
                "audio_channels": 2,
                "audio_sample_rate": 48000,
                "stream_count": 2,
            },
        ),
        (
            "video_rotated.mov",
            "video/quicktime",
            {
                "container": "mov",
                "width": 48,
                "height": 64,
                "rotation": 90,
                "video_codec": "h264",
                "audio_codec": None,
                "stream_count": 1,
            },
        ),
        (
            "video_hevc.mp4",
            "video/mp4",
            {
                "container": "mov",
                "width": 64,
                "height": 48,
                "rotation": 0,
                "video_codec": "hevc",
                "audio_codec": None,
                "stream_count": 1,
            },
        ),
        (
            "video_vp9_opus.webm",
            "video/webm",
            {
                "container": "matroska",
                "width": 64,
                "height": 48,
                "video_codec": "vp9",
                "audio_codec": "opus",
                "audio_channels": 2,
                "audio_sample_rate": 48000,
                "stream_count": 2,
            },
        ),
    ],
)
def test_video_is_probed_and_gets_a_poster_and_a_thumbnail(alice, api, name, content_type, expected):
    client = api(alice)
    status, row = _processed(client, name, content_type)
    assert status == "ready", row.reason_message
    resource = client.get(f"/api/v1/attachments/{row.pk}").json()
    meta = resource["metadata"]
    assert {key: meta[key] for key in expected} == expected
    assert 1.9 <= meta["duration_seconds"] <= 2.1
    assert meta["bit_rate"] > 0
    width, height = expected["width"], expected["height"]
    assert resource["derivatives"]["poster"] == {"width": width, "height": height}
    assert resource["derivatives"]["thumbnail"] == {"width": width, "height": height}
    assert {"download", "thumbnail", "poster"} <= set(resource["links"])
    for link in ("thumbnail", "poster"):
        response = client.get(f"/api/v1/attachments/{row.pk}/{link}")
        assert response.status_code == 200, link
        assert response["Content-Type"] == "image/webp"
        with Image.open(io.BytesIO(_body(response))) as im:
            assert im.format == "WEBP" and im.size == (width, height), link
            rgb = im.convert("RGB")
            # Red top left and blue bottom right only once turned by the display matrix.
            assert _near(rgb.getpixel((3, 3)), RED), (link, rgb.getpixel((3, 3)))
            assert _near(rgb.getpixel((im.width - 4, im.height - 4)), BLUE), link
    # What download serves is the remuxed copy (test_media_served.py looks inside it), never the original.
    download = client.get(f"/api/v1/attachments/{row.pk}/download")
    assert download.status_code == 200 and _body(download) != (GENERATED / name).read_bytes()
    assert download["Content-Type"] == content_type == resource["content_type"]


@pytest.mark.parametrize(
    ("name", "content_type", "expected"),
    [
        ("audio_aac.m4a", "audio/mp4", {"container": "mov", "audio_codec": "aac", "audio_sample_rate": 48000}),
        ("audio.mp3", "audio/mpeg", {"container": "mp3", "audio_codec": "mp3", "audio_sample_rate": 44100}),
        ("audio_opus.ogg", "audio/ogg", {"container": "ogg", "audio_codec": "opus", "audio_sample_rate": 48000}),
        ("audio_pcm.wav", "audio/x-wav", {"container": "wav", "audio_codec": "pcm_s16le", "audio_sample_rate": 8000}),
    ],
)
def test_audio_is_probed_without_a_poster(alice, api, name, content_type, expected):
    client = api(alice)
    status, row = _processed(client, name, content_type)
    assert status == "ready", row.reason_message
    resource = client.get(f"/api/v1/attachments/{row.pk}").json()
    assert resource["content_type"] == content_type
    meta = resource["metadata"]
    assert {key: meta[key] for key in expected} == expected
    assert meta["audio_channels"] == 2 and meta["stream_count"] == 1
    assert 1.8 <= meta["duration_seconds"] <= 2.1
    assert (meta["width"], meta["height"], meta["video_codec"], meta["rotation"]) == (None, None, None, None)
    assert "poster" not in resource["derivatives"] and "thumbnail" not in resource["derivatives"]
    assert "poster" not in resource["links"]
    for link in ("thumbnail", "poster"):
        assert client.get(f"/api/v1/attachments/{row.pk}/{link}").status_code == 404


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("video_4_hours.mp4", "duration_limit"),
        ("video_8200x4400.mp4", "pixel_limit"),
        ("video_truncated.mp4", "corrupt"),
        ("video_64_streams.webm", "stream_limit"),
        ("video_mpeg4_part2.mp4", "codec_not_allowed"),
    ],
)
def test_hostile_video_is_rejected_with_its_reason(alice, api, name, code):
    client = api(alice)
    status, row = _processed(client, name, "video/mp4")
    assert (status, row.reason_code) == ("rejected", code), row.reason_message
    response = client.get(f"/api/v1/attachments/{row.pk}")
    assert response.json()["reason"]["code"] == code
    assert client.get(f"/api/v1/attachments/{row.pk}/thumbnail").status_code == 404
    # Nothing is stored for it: no served copy, poster or thumbnail, and no download.
    assert not row.derivatives.exists()
    assert client.get(f"/api/v1/attachments/{row.pk}/download").status_code == 404


def test_a_huge_frame_is_refused_from_its_header_without_being_decoded(tmp_path):
    # 8200x4400 in yuv420p is 54 MB: had anything decoded it (FFmpeg's stream probe
    # decodes a frame unless told not to), the job's peak memory would show it.
    from processing.sandbox import run_job

    small_dir, huge_dir = tmp_path / "small", tmp_path / "huge"
    small_dir.mkdir()
    huge_dir.mkdir()
    small = run_job("media", GENERATED / "video_mpeg4_part2.mp4", small_dir)
    huge = run_job("media", GENERATED / "video_8200x4400.mp4", huge_dir)
    assert (huge.outcome, huge.reason_code) == ("rejected", "pixel_limit")
    assert small.peak_rss_kb and huge.peak_rss_kb
    frame_kb = 8200 * 4400 * 3 // 2 // 1024
    assert huge.peak_rss_kb - small.peak_rss_kb < frame_kb // 2, (huge.peak_rss_kb, small.peak_rss_kb)


def test_bounds_are_settings(alice, api, settings):
    settings.AIRLOCK_DECODE_LIMITS = settings.AIRLOCK_DECODE_LIMITS.replace(media_duration_seconds=1)
    status, row = _processed(api(alice), "video_h264_aac.mp4", "video/mp4")
    assert (status, row.reason_code) == ("rejected", "duration_limit")
    settings.AIRLOCK_DECODE_LIMITS = settings.AIRLOCK_DECODE_LIMITS.replace(media_duration_seconds=5 * 3600)
    status, row = _processed(api(alice), "video_4_hours.mp4", "video/mp4")
    assert status == "ready", row.reason_message
    assert row.metadata["duration_seconds"] == 14401.0
    settings.AIRLOCK_DECODE_LIMITS = settings.AIRLOCK_DECODE_LIMITS.replace(media_pixels=64 * 47)
    status, row = _processed(api(alice), "video_h264_aac.mp4", "video/mp4")
    assert (status, row.reason_code) == ("rejected", "pixel_limit")
    settings.AIRLOCK_DECODE_LIMITS = settings.AIRLOCK_DECODE_LIMITS.replace(media_streams=1, media_pixels=64 * 48)
    status, row = _processed(api(alice), "video_h264_aac.mp4", "video/mp4")
    assert (status, row.reason_code) == ("rejected", "stream_limit")


def test_a_header_lying_about_the_duration_buys_nothing(alice, api):
    # Ten minutes of frames under headers that say 1 s: the probe never walks the packets,
    # so it reads the lie, decodes one frame and is done.
    started = time.monotonic()
    status, row = _processed(api(alice), "video_lying_duration.mp4", "video/mp4")
    assert status == "ready", row.reason_message
    assert row.metadata["duration_seconds"] == 1.0
    assert time.monotonic() - started < 10
