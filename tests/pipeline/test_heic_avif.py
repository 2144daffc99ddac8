"""HEIC/HEIF/AVIF photos: detected from the brands, bounded from `ispe`, oriented, no location served.

Every check of "no location" parses the bytes the API serves (download, display,
thumbnail) and the stored derivatives, never the code's own flags; the same checks are
first run on the uploaded originals, to show they would see the location if it were there.
"""

from __future__ import annotations

import io
import struct

import pytest
from PIL import Image

from attachments.models import Attachment
from attachments.storage import get_gateway
from processing.sandbox import images
from processing.sandbox.limits import Bounds
from processing.sandbox.outcome import Rejected
from processing.sniff import detect_type
from tests.corpus import corpus_dir
from tests.support import jpeg_bytes, run_pipeline, upload

pytestmark = pytest.mark.django_db

GENERATED = corpus_dir() / "generated"
GPS_IFD = 0x8825
RED, BLUE, GREEN = (255, 0, 0), (0, 0, 255), (0, 200, 0)


def _body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def location_in(data: bytes) -> list[str]:
    """Every trace of a location (or of any EXIF/XMP block) found by parsing `data`."""
    found = []
    with Image.open(io.BytesIO(data)) as im:
        exif = im.getexif()
        if GPS_IFD in exif or exif.get_ifd(GPS_IFD):
            found.append("EXIF GPS IFD")
        if len(exif):
            found.append("EXIF")
        xmp = im.info.get("xmp") or b""
        if b"GPS" in (xmp if isinstance(xmp, bytes) else xmp.encode()):
            found.append("XMP GPS")
    for needle in (b"GPS", b"Exif\0", b"xmpmeta", b"exif:GPS"):
        if needle in data:
            found.append(f"bytes {needle!r}")
    return found


def _color_near(pixel: tuple[int, ...], color: tuple[int, int, int], tolerance: int = 40) -> bool:
    return all(abs(a - b) <= tolerance for a, b in zip(pixel, color))


def _ready(client, name: str, *, profile: str = "image", content_type: str = "image/heic") -> str:
    data = (GENERATED / name).read_bytes()
    attachment_id = upload(
        client, data, profile=profile, filename=f"IMG_0001.{name.rsplit('.', 1)[1].upper()}", content_type=content_type
    )
    assert run_pipeline(attachment_id) == "ready", Attachment.objects.get(pk=attachment_id).reason_message
    return attachment_id


@pytest.mark.parametrize(
    ("name", "declared"), [("heic_gps_rotated.heic", "image/heic"), ("avif_gps_rotated.avif", "image/avif")]
)
def test_photo_with_gps_and_rotation_is_served_oriented_and_without_location(alice, api, name, declared):
    original = (GENERATED / name).read_bytes()
    assert "EXIF GPS IFD" in location_in(original) and "bytes b'exif:GPS'" in location_in(original)
    client = api(alice)
    attachment_id = _ready(client, name, content_type=declared)
    resource = client.get(f"/api/v1/attachments/{attachment_id}").json()
    # As displayed: the stored 640x480 turned by its orientation.
    assert resource["metadata"]["width"] == 480 and resource["metadata"]["height"] == 640
    assert resource["content_type"] == "image/jpeg"
    assert resource["derivatives"]["display"] == {"width": 480, "height": 640}
    assert resource["derivatives"]["thumbnail"] == {"width": 192, "height": 256}
    assert {"download", "thumbnail", "display"} <= set(resource["links"])

    served = {}
    for link in ("download", "display", "thumbnail"):
        response = client.get(f"/api/v1/attachments/{attachment_id}/{link}")
        assert response.status_code == 200, link
        served[link] = _body(response)
        assert location_in(served[link]) == [], link
        with Image.open(io.BytesIO(served[link])) as im:
            expected = {"thumbnail": (192, 256)}.get(link, (480, 640))
            assert im.size == expected, link
            rgb = im.convert("RGB")
            # The red square is top left and the blue one bottom right only once oriented.
            assert _color_near(rgb.getpixel((4, 4)), RED), (link, rgb.getpixel((4, 4)))
            assert _color_near(rgb.getpixel((rgb.width - 5, rgb.height - 5)), BLUE), link
        if link != "thumbnail":
            assert response["Content-Type"] == "image/jpeg"
    download = client.get(f"/api/v1/attachments/{attachment_id}/download")
    assert 'filename="IMG_0001.jpg"' in download["Content-Disposition"]
    # Under 2048 px the display rendition is the full size too, but its own encoding.
    assert served["download"] != served["display"]

    # And every object stored for it besides the original upload.
    row = Attachment.objects.get(pk=attachment_id)
    gateway = get_gateway()
    for derivative in row.derivatives.all():
        assert location_in(b"".join(gateway.iter_chunks(derivative.storage_key))) == [], derivative.kind
    assert row.served_key == row.derivatives.get(kind="sanitized").storage_key


def _large_phone_heic(size: tuple[int, int]) -> bytes:
    """A photo stored turned (EXIF Orientation 6) with GPS in EXIF and XMP, as a phone writes it."""
    from tests.corpus.make_generated import XMP_GPS, _phone_exif

    shown = Image.linear_gradient("L").resize(size).convert("RGB")
    shown.paste(RED, (0, 0, size[0] // 5, size[1] // 5))
    shown.paste(BLUE, (size[0] - size[0] // 5, size[1] - size[1] // 5, size[0], size[1]))
    buf = io.BytesIO()
    shown.transpose(Image.Transpose.ROTATE_90).save(buf, "HEIF", quality=60, exif=_phone_exif(6), xmp=XMP_GPS)
    return buf.getvalue()


def test_download_of_a_heic_is_full_resolution_oriented_without_location_and_display_stays_2048(alice, api):
    data = _large_phone_heic((2400, 3200))  # shown 2400x3200, stored 3200x2400
    assert "EXIF GPS IFD" in location_in(data)
    client = api(alice)
    attachment_id = upload(client, data, filename="IMG_0002.HEIC", content_type="image/heic")
    assert run_pipeline(attachment_id) == "ready", Attachment.objects.get(pk=attachment_id).reason_message
    resource = client.get(f"/api/v1/attachments/{attachment_id}").json()
    assert (resource["metadata"]["width"], resource["metadata"]["height"]) == (2400, 3200)
    assert resource["derivatives"]["display"] == {"width": 1536, "height": 2048}
    download = client.get(f"/api/v1/attachments/{attachment_id}/download")
    body = _body(download)
    assert download["Content-Type"] == "image/jpeg" and 'filename="IMG_0002.jpg"' in download["Content-Disposition"]
    assert location_in(body) == []
    with Image.open(io.BytesIO(body)) as im:
        assert im.format == "JPEG" and im.size == (2400, 3200)  # the source's pixels, as displayed
        assert im.getexif().get(0x0112) is None  # orientation applied, not declared
        rgb = im.convert("RGB")
        assert _color_near(rgb.getpixel((20, 20)), RED) and _color_near(rgb.getpixel((2380, 3180)), BLUE)
    display = _body(client.get(f"/api/v1/attachments/{attachment_id}/display"))
    with Image.open(io.BytesIO(display)) as im:
        assert im.size == (1536, 2048) and location_in(display) == []
    row = Attachment.objects.get(pk=attachment_id)
    assert row.size == len(body) and row.content_type == "image/jpeg"
    assert row.served_key == row.derivatives.get(kind="sanitized").storage_key
    assert row.derivatives.get(kind="sanitized").width == 2400


def test_multi_image_heic_shows_its_primary_image(alice, api):
    client = api(alice)
    attachment_id = _ready(client, "heic_multi.heic")
    resource = client.get(f"/api/v1/attachments/{attachment_id}").json()
    assert (resource["metadata"]["width"], resource["metadata"]["height"]) == (400, 300)
    for link in ("display", "thumbnail"):
        with Image.open(io.BytesIO(_body(client.get(f"/api/v1/attachments/{attachment_id}/{link}")))) as im:
            assert _color_near(im.convert("RGB").getpixel((im.width // 2, im.height // 2)), GREEN), link


def test_heic_whose_header_claims_100k_by_100k_is_a_pixel_limit(alice, api):
    data = (GENERATED / "heic_ispe_100k.heic").read_bytes()
    attachment_id = upload(api(alice), data, filename="huge.heic", content_type="image/heic")
    assert run_pipeline(attachment_id) == "rejected"
    row = Attachment.objects.get(pk=attachment_id)
    assert row.reason_code == "pixel_limit" and "100000x100000" in row.reason_message
    assert not row.derivatives.exists()


def test_the_pixel_bound_is_checked_before_any_decoder_sees_the_bytes(monkeypatch, tmp_path):
    def no_decoder(*args, **kwargs):
        raise AssertionError("a decoder was handed a file over the pixel bound")

    monkeypatch.setattr(images.Image, "open", no_decoder)
    src = GENERATED / "heic_ispe_100k.heic"
    with pytest.raises(Rejected) as raised:
        images.process(src, tmp_path, Bounds())
    assert raised.value.reason_code == "pixel_limit"
    # The primary image alone is not the bound: a secondary image over it is refused too.
    with pytest.raises(Rejected) as raised:
        images.process(GENERATED / "heic_multi.heic", tmp_path, Bounds(max_pixels=320 * 240))
    assert raised.value.reason_code == "pixel_limit" and "400x300" in raised.value.message


def test_avatar_accepts_a_heic(alice, api):
    client = api(alice)
    attachment_id = _ready(client, "heic_gps_rotated.heic", profile="avatar")
    display = client.get(f"/api/v1/attachments/{attachment_id}").json()["links"]["display"]
    assert display.split("?")[0].endswith("/display")


def test_a_jpeg_has_no_display_rendition(alice, api):
    client = api(alice)
    attachment_id = upload(client, jpeg_bytes((320, 240)))
    assert run_pipeline(attachment_id) == "ready"
    resource = client.get(f"/api/v1/attachments/{attachment_id}").json()
    assert "display" not in resource["derivatives"] and "display" not in resource["links"]
    assert client.get(f"/api/v1/attachments/{attachment_id}/display").status_code == 404


def _ftyp(major: bytes, *compatible: bytes) -> bytes:
    body = major + b"\0\0\0\0" + b"".join(compatible)
    return struct.pack(">I", 8 + len(body)) + b"ftyp" + body + b"\0" * 32


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (_ftyp(b"heic", b"mif1", b"heic"), "image/heic"),
        (_ftyp(b"heix", b"mif1", b"heix"), "image/heic"),  # 10-bit HEIC: filetype misses it
        (_ftyp(b"mif1", b"mif1", b"heic"), "image/heic"),
        (_ftyp(b"mif1", b"mif1", b"miaf"), "image/heif"),  # a HEIF of no named codec brand
        (_ftyp(b"avif", b"avif", b"mif1", b"miaf"), "image/avif"),
        (_ftyp(b"mif1", b"avif", b"mif1"), "image/avif"),
        (_ftyp(b"hevc", b"msf1", b"hevc"), None),  # an HEVC image sequence: not a photo
        (_ftyp(b"isom", b"isom", b"mp41"), "video/mp4"),  # videos keep filetype's answer
    ],
)
def test_heif_family_is_named_from_its_brands(head, expected):
    assert detect_type(head) == expected
