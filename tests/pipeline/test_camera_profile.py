"""The camera profile: a phone's camera roll, each file processed as what its bytes are.

Photos go the image path (thumbnail, a HEIC's display and full-resolution JPEG, variants),
videos the media path (probe, poster, location-free copy), each under its own kind's
limit. Every check reads the resource the API answers or the bytes it serves.
"""

from __future__ import annotations

import io
from urllib.parse import urlsplit

import pytest
from PIL import Image

from attachments.models import Attachment
from tests.corpus import corpus_dir
from tests.support import create_intent, jpeg_bytes, pdf_bytes, png_bytes, put_bytes, run_pipeline

pytestmark = pytest.mark.django_db

GENERATED = corpus_dir() / "generated"
MIB = 1024 * 1024


def _body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def send(client, data: bytes, *, profile: str, filename: str, declared: str) -> str:
    """Intent + PUT with the headers the plan names; returns the attachment id."""
    intent = create_intent(client, profile=profile, filename=filename, size=len(data), content_type=declared)
    assert intent.status_code == 201, intent.content
    upload = intent.json()["upload"]
    response = put_bytes(upload["url"], data, content_type=upload["headers"]["Content-Type"])
    assert response.status_code == 202, response.content
    return intent.json()["id"]


def _ready(client, data: bytes, **claim: str) -> dict:
    attachment_id = send(client, data, **claim)
    assert run_pipeline(attachment_id) == "ready", Attachment.objects.get(pk=attachment_id).reason_message
    return client.get(f"/api/v1/attachments/{attachment_id}").json()


# (file, name a phone gives it, what its browser may declare, the served type, derivatives it has)
CAMERA_ROLL = [
    ("jpeg", "IMG_0001.JPG", "image/jpeg", "image/jpeg", {"thumbnail"}),
    ("heic_gps_rotated.heic", "IMG_0002.HEIC", "", "image/jpeg", {"thumbnail", "display"}),
    ("png", "Screenshot.PNG", "application/octet-stream", "image/png", {"thumbnail"}),
    ("video_h264_aac.mp4", "VID_0003.MP4", "video/mp4", "video/mp4", {"thumbnail", "poster"}),
    ("video_rotated.mov", "IMG_0004.MOV", "", "video/quicktime", {"thumbnail", "poster"}),
]


def _bytes_of(name: str) -> bytes:
    if name == "jpeg":
        return jpeg_bytes(size=(96, 64))
    if name == "png":
        return png_bytes(size=(96, 64))
    return (GENERATED / name).read_bytes()


@pytest.mark.parametrize(("name", "filename", "declared", "served", "derivatives"), CAMERA_ROLL)
def test_camera_takes_a_camera_roll_and_processes_each_by_its_bytes(
    alice, api, name, filename, declared, served, derivatives
):
    client = api(alice)
    resource = _ready(client, _bytes_of(name), profile="camera", filename=filename, declared=declared)
    assert resource["profile"] == "camera" and resource["content_type"] == served
    assert set(resource["derivatives"]) == derivatives
    row = Attachment.objects.get(pk=resource["id"])
    assert row.declared_type == (declared or "")
    links = resource["links"]
    assert {"download", "thumbnail"} <= set(links)
    parts = urlsplit(links["download"])
    download = client.get(f"{parts.path}?{parts.query}")
    assert download.status_code == 200 and download["Content-Type"].startswith(served)
    body = _body(download)
    if served.startswith("image/"):
        # A photo: the image path (dimensions, variants listed and made on request), no media facts.
        assert resource["metadata"]["width"] and "duration_seconds" not in resource["metadata"]
        assert set(links["variants"]) == {"small", "medium", "large"}
        variant = client.get(f"/api/v1/attachments/{resource['id']}/variants/small", HTTP_ACCEPT="image/webp")
        assert variant.status_code == 200 and variant["Content-Type"] == "image/webp"
        with Image.open(io.BytesIO(body)) as im:
            assert im.format == {"image/jpeg": "JPEG", "image/png": "PNG"}[served]
    else:
        # A video: the media path (probe, poster, the location-free copy served), no variants.
        assert resource["metadata"]["duration_seconds"] > 0 and resource["metadata"]["video_codec"]
        assert "poster" in links and "variants" not in links
        assert client.get(f"/api/v1/attachments/{resource['id']}/variants/small").status_code == 404
        assert body != (GENERATED / name).read_bytes()  # the copy, not the original


def test_a_heic_to_camera_serves_a_full_resolution_jpeg_and_a_display(alice, api):
    client = api(alice)
    resource = _ready(
        client, _bytes_of("heic_gps_rotated.heic"), profile="camera", filename="IMG_0002.HEIC", declared=""
    )
    # As the image profile does: the stored 640x480 turned by its orientation, served whole.
    assert resource["metadata"]["width"] == 480 and resource["metadata"]["height"] == 640
    assert resource["derivatives"]["display"] == {"width": 480, "height": 640}


def test_a_pdf_sent_to_camera_is_rejected_by_its_bytes(alice, api):
    attachment_id = send(api(alice), pdf_bytes(), profile="camera", filename="IMG_0005.JPG", declared="")
    assert run_pipeline(attachment_id) == "rejected"
    row = Attachment.objects.get(pk=attachment_id)
    assert row.reason_code == "type_not_allowed" and "application/pdf" in row.reason_message


def test_a_pdf_declared_as_one_is_refused_at_the_intent(alice, api):
    response = create_intent(
        api(alice), profile="camera", filename="invoice.pdf", size=100, content_type="application/pdf"
    )
    assert response.status_code == 400 and response.json()["error"]["code"] == "TYPE_NOT_ALLOWED"
    assert not Attachment.objects.exists()


@pytest.mark.parametrize("profile", ["image", "camera"])
@pytest.mark.parametrize(
    ("filename", "declared"),
    [
        ("IMG_0006.HEIC", ""),
        ("IMG_0006.HEIC", "application/octet-stream"),
        ("photo.png", "application/pdf"),  # inconsistent with the name, which names an allowed type
        ("photo", "application/octet-stream"),
    ],
)
def test_an_unknown_or_misnamed_declared_type_is_accepted_and_the_bytes_decide(alice, api, profile, filename, declared):
    client = api(alice)
    resource = _ready(client, png_bytes(), profile=profile, filename=filename, declared=declared)
    assert resource["content_type"] == "image/png"
    assert Attachment.objects.get(pk=resource["id"]).declared_type == declared


@pytest.mark.parametrize("profile", ["image", "camera"])
def test_a_png_declared_as_jpeg_ends_ready_as_png_and_the_claim_is_recorded(alice, api, profile):
    client = api(alice)
    resource = _ready(client, png_bytes(), profile=profile, filename="cat.jpg", declared="image/jpeg")
    assert resource["content_type"] == "image/png"
    row = Attachment.objects.get(pk=resource["id"])
    assert row.declared_type == "image/jpeg" and row.content_type == "image/png"


def test_a_video_declared_octet_stream_to_image_is_rejected_by_its_bytes(alice, api):
    data = (GENERATED / "video_h264_aac.mp4").read_bytes()
    attachment_id = send(api(alice), data, profile="image", filename="clip", declared="application/octet-stream")
    assert run_pipeline(attachment_id) == "rejected"
    assert Attachment.objects.get(pk=attachment_id).reason_code == "type_not_allowed"


@pytest.fixture
def small_photo_limit(settings):
    """The camera's photo kind limited to 2 KB; its video kind keeps the media limit."""
    camera = settings.AIRLOCK_PROFILES["camera"]
    kinds = {**camera["kinds"], "photo": {**camera["kinds"]["photo"], "max_bytes": 2000}}
    settings.AIRLOCK_PROFILES = {**settings.AIRLOCK_PROFILES, "camera": {**camera, "kinds": kinds}}


def test_camera_lists_its_kinds_and_its_largest_limit(alice, api):
    profiles = {p["name"]: p for p in api(alice).get("/api/v1/profiles").json()["profiles"]}
    camera = profiles["camera"]
    kinds = {k["name"]: k for k in camera["kinds"]}
    assert kinds["photo"]["max_bytes"] == profiles["image"]["max_bytes"]
    assert kinds["video"]["max_bytes"] == profiles["media"]["max_bytes"] == camera["max_bytes"] == 1024 * MIB
    assert "image/heic" in kinds["photo"]["allowed_types"] and "video/quicktime" in kinds["video"]["allowed_types"]
    assert set(camera["allowed_types"]) == set(kinds["photo"]["allowed_types"]) | set(kinds["video"]["allowed_types"])
    assert profiles["image"]["kinds"] == []


@pytest.mark.usefixtures("small_photo_limit")
def test_a_photo_over_the_photo_limit_is_rejected_too_large_at_intake(alice, api):
    data = jpeg_bytes(size=(400, 300))
    assert len(data) > 2000
    attachment_id = send(api(alice), data, profile="camera", filename="IMG_0007.HEIC", declared="")
    assert run_pipeline(attachment_id) == "rejected"
    row = Attachment.objects.get(pk=attachment_id)
    assert row.reason_code == "too_large" and "2000 byte limit for a photo" in row.reason_message


@pytest.mark.usefixtures("small_photo_limit")
def test_the_intent_holds_a_declared_kind_to_its_limit_and_an_unknown_one_to_the_largest(alice, api):
    client = api(alice)
    declared_photo = create_intent(client, profile="camera", filename="a.jpg", size=5000, content_type="image/jpeg")
    assert declared_photo.status_code == 413 and declared_photo.json()["error"]["details"]["max_bytes"] == 2000
    unknown = create_intent(client, profile="camera", filename="a.heic", size=5000, content_type="")
    assert unknown.status_code == 201, unknown.content
    too_big = create_intent(client, profile="camera", filename="a.mov", size=1024 * MIB + 1, content_type="")
    assert too_big.status_code == 413 and too_big.json()["error"]["details"]["max_bytes"] == 1024 * MIB


@pytest.mark.usefixtures("small_photo_limit")
def test_a_video_over_the_photo_limit_is_within_the_video_limit(alice, api):
    data = (GENERATED / "video_h264_aac.mp4").read_bytes()
    assert len(data) > 2000
    client = api(alice)
    resource = _ready(client, data, profile="camera", filename="VID.MP4", declared="")
    assert resource["content_type"] == "video/mp4"
