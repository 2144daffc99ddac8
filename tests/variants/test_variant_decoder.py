"""The `variant` sandbox decoder itself: bounded like derive, fit within, never upscaled, no metadata."""

from __future__ import annotations

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
    _, image = _made(
        tmp_path, jpeg_bytes(size=(400, 200), exif=exif.tobytes()), variant_size=640, variant_format="jpeg"
    )
    assert image.size == (200, 400) and not image.getexif()


@pytest.mark.parametrize(
    ("data", "bounds", "code"),
    [
        (jpeg_bytes(size=(400, 300)), {"variant_size": 640, "max_pixels": 1000}, "pixel_limit"),
        (jpeg_bytes(size=(400, 300)), {"variant_size": 0}, "corrupt"),
        (jpeg_bytes(size=(400, 300)), {"variant_size": 640, "variant_format": "gif"}, "corrupt"),
        (b"%PDF-1.4 not an image", {"variant_size": 640}, "corrupt"),
    ],
)
def test_refuses_what_derive_would(tmp_path, data, bounds, code):
    with pytest.raises(Rejected) as caught:
        _made(tmp_path, data, **bounds)
    assert caught.value.reason_code == code


def test_a_pdf_page_is_rendered_by_the_variant_job_when_a_page_is_asked_for(tmp_path):
    """The console's page previews: page N of a PDF through the same job, within the long edge asked for."""
    from processing.sandbox.pdfs import page_variant
    from tests.support import pdf_bytes

    source = tmp_path / "doc.pdf"
    source.write_bytes(pdf_bytes(pages=3))
    work = tmp_path / "work"
    work.mkdir()
    data, files = page_variant(source, work, Bounds(variant_size=300, variant_format="webp", variant_page=3))
    made = Image.open(work / files["variant"])
    assert made.format == "WEBP" and max(made.size) == 300 and (data["width"], data["height"]) == made.size
    with pytest.raises(Rejected, match="no page 4"):
        page_variant(source, work, Bounds(variant_size=300, variant_format="webp", variant_page=4))


def test_a_source_removed_before_the_job_is_an_outage_not_a_verdict(tmp_path):
    """Local storage hands the renderer the stored file itself: gone by then, the request is retried (503)."""
    from attachments.hooks import RenderUnavailable
    from processing.variants import render_variant

    with pytest.raises(RenderUnavailable):
        render_variant(tmp_path / "gone.jpg", tmp_path / "work", 640, "webp")
