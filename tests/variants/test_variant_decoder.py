"""The `variant` sandbox decoder itself: bounded like derive, fit within, never upscaled, no metadata."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from processing.sandbox.images import variant
from processing.sandbox.limits import Bounds
from processing.sandbox.outcome import Rejected
from tests.support import jpeg_bytes, png_bytes


def _made(tmp_path, data: bytes, **bounds):
    source = tmp_path / "source"
    source.write_bytes(data)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    facts, files = variant(source, work, Bounds(**bounds))
    return facts, Image.open(work / files["variant"])


def test_fits_within_and_never_upscales(tmp_path):
    facts, image = _made(tmp_path, jpeg_bytes(size=(1000, 500)), variant_size=640, variant_format="jpeg")
    assert image.format == "JPEG" and image.size == (640, 320) == (facts["width"], facts["height"])
    _, small = _made(tmp_path, png_bytes(size=(40, 30)), variant_size=640, variant_format="webp")
    assert small.format == "WEBP" and small.size == (40, 30)


def test_orientation_is_applied_and_no_exif_is_kept(tmp_path):
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90° on display
    exif[0x010F] = "PhoneMaker"
    _, image = _made(tmp_path, jpeg_bytes(size=(400, 200), exif=exif.tobytes()), variant_size=640,
                     variant_format="jpeg")
    assert image.size == (200, 400) and not image.getexif()


@pytest.mark.parametrize(("data", "bounds", "code"), [
    (jpeg_bytes(size=(400, 300)), {"variant_size": 640, "max_pixels": 1000}, "pixel_limit"),
    (jpeg_bytes(size=(400, 300)), {"variant_size": 0}, "corrupt"),
    (jpeg_bytes(size=(400, 300)), {"variant_size": 640, "variant_format": "gif"}, "corrupt"),
    (b"%PDF-1.4 not an image", {"variant_size": 640}, "corrupt"),
])
def test_refuses_what_derive_would(tmp_path, data, bounds, code):
    with pytest.raises(Rejected) as caught:
        _made(tmp_path, data, **bounds)
    assert caught.value.reason_code == code
