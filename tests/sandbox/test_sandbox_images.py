"""Generated image fixtures: header-only pixel bombs, the exact bound, metadata and orientation."""

from __future__ import annotations

import hashlib
import io
import struct
import zlib

import pytest
from PIL import ExifTags, Image

from processing.sandbox import Bounds
from processing.sandbox.images import gif_canvas, webp_canvas
from tests.sandbox.helpers import corpus_dir, noisy_png, outcome, with_invalid_deflate

BOMB = (8000, 7000)  # 56 Mpx: above our 50 Mpx bound, below Pillow's own 89 Mpx warning


def _encode(im: Image.Image, fmt: str, **params) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **params)
    return buf.getvalue()


def _png_chunk(ctype: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + ctype + body + struct.pack(">I", zlib.crc32(ctype + body))


def png_header_bomb(width: int, height: int) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", ihdr)
        + _png_chunk(b"IDAT", zlib.compress(b"\0" * 64))
        + _png_chunk(b"IEND", b"")
    )


def jpeg_header_bomb(width: int, height: int) -> bytes:
    data = bytearray(_encode(Image.new("RGB", (8, 8), "red"), "JPEG"))
    sof = data.index(b"\xff\xc0")  # baseline SOF0: length(2) precision(1) height(2) width(2)
    data[sof + 5 : sof + 9] = struct.pack(">HH", height, width)
    return bytes(data)


def gif_header_bomb(width: int, height: int) -> bytes:
    data = bytearray(_encode(Image.new("P", (8, 8)), "GIF"))
    data[6:10] = struct.pack("<HH", width, height)  # logical screen descriptor
    return bytes(data)


def webp_header_bomb(width: int, height: int) -> bytes:
    # Animated WebP (VP8X canvas + ANMF frames): frames may be smaller than the canvas,
    # so a big canvas with 8x8 frames is a valid file whose header claims 56 Mpx.
    frames = [Image.new("RGB", (8, 8), c) for c in ("red", "blue")]
    data = bytearray(_encode(frames[0], "WEBP", save_all=True, append_images=frames[1:], lossless=True))
    assert data[12:16] == b"VP8X"
    data[24:27] = (width - 1).to_bytes(3, "little")
    data[27:30] = (height - 1).to_bytes(3, "little")
    return bytes(data)


BOMBS = {
    "png": png_header_bomb,
    "jpeg": jpeg_header_bomb,
    "gif": gif_header_bomb,
    "webp": webp_header_bomb,
}


@pytest.mark.parametrize("fmt", sorted(BOMBS))
def test_header_pixel_bomb_is_refused_before_decoding(run, fmt: str) -> None:
    data = BOMBS[fmt](*BOMB)
    if fmt != "webp":  # Pillow reads the claimed size from the header alone
        assert Image.open(io.BytesIO(data)).size == BOMB
    result = run("image", data)
    assert outcome(result) == "rejected:pixel_limit", result.message
    assert "8000x7000" in result.message
    assert result.peak_rss_kb is not None and result.peak_rss_kb < 150_000  # nothing allocated


def test_huge_webp_canvas_is_pixel_limit_not_an_allocation_failure(run) -> None:
    # libwebp's animation decoder callocs two full canvases when Pillow *opens* the file:
    # at 20000x20000 that is 3.2 GB, over RLIMIT_AS. Our RIFF probe must answer first.
    result = run("image", webp_header_bomb(20_000, 20_000))
    assert outcome(result) == "rejected:pixel_limit", result.message


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "GIF", "WEBP"])
def test_pixel_bound_is_inclusive(run, fmt: str) -> None:
    data = _encode(Image.new("RGB", (100, 50), "green"), fmt)
    assert outcome(run("image", data, bounds=Bounds(max_pixels=5000))) == "ready"
    assert outcome(run("image", data, bounds=Bounds(max_pixels=4999))) == "rejected:pixel_limit"


def test_image_just_under_the_default_bound_thumbnails(run) -> None:
    side = 7071  # 7071 * 7071 = 49,999,041 <= 50,000,000
    data = _encode(Image.new("L", (side, side), 128), "PNG", compress_level=1)
    result = run("image", data)
    assert outcome(result) == "ready", result.message
    assert result.data["thumbnail"] == {"width": 256, "height": 256}
    assert outcome(run("image", png_header_bomb(side + 1, side))) == "rejected:pixel_limit"


def test_gif_frame_zero_extents_count_before_pillow_allocates(run) -> None:
    # 100x100 screen whose first frame sits at (0, 0)-(8000, 7000): Pillow grows the
    # canvas and allocates the frame's disposal buffer inside Image.open.
    data = bytearray(_encode(Image.new("P", (8, 8)), "GIF"))
    descriptor = data.index(b"\x2c", 13)
    data[6:10] = struct.pack("<HH", 100, 100)
    data[descriptor + 5 : descriptor + 9] = struct.pack("<HH", *BOMB)
    assert gif_canvas(bytes(data)) == BOMB
    result = run("image", bytes(data))
    assert outcome(result) == "rejected:pixel_limit", result.message
    assert result.peak_rss_kb is not None and result.peak_rss_kb < 60_000
    bomb = run("image", corpus_dir() / "pillow/decompression_bomb.gif")
    assert bomb.peak_rss_kb is not None and bomb.peak_rss_kb < 60_000  # was 115 MB


def test_webp_canvas_is_read_from_the_riff_header() -> None:
    im = Image.new("RGBA", (37, 21), "red")
    for params in ({"lossless": True}, {"quality": 50}, {"exif": b"Exif\0\0"}):
        assert webp_canvas(_encode(im, "WEBP", **params)) == (37, 21)


def _jpeg_with_exif(size: tuple[int, int], orientation: int, gps: bool) -> bytes:
    im = Image.new("RGB", size, "blue")
    im.paste((255, 0, 0), (0, 0, size[0] // 2, size[1]))  # left half red
    exif = Image.Exif()
    exif[ExifTags.Base.Orientation] = orientation
    exif[ExifTags.Base.Make] = "SpyCam"
    if gps:
        ifd = exif.get_ifd(ExifTags.IFD.GPSInfo)
        ifd[ExifTags.GPS.GPSLatitudeRef] = "N"
        ifd[ExifTags.GPS.GPSLatitude] = (48.0, 51.0, 24.0)
        ifd[ExifTags.GPS.GPSLongitudeRef] = "E"
        ifd[ExifTags.GPS.GPSLongitude] = (2.0, 21.0, 3.0)
    return _encode(im, "JPEG", exif=exif, comment=b"secret comment")


def test_gps_never_reaches_thumbnail_or_sanitized(run) -> None:
    data = _jpeg_with_exif((64, 48), orientation=1, gps=True)
    assert Image.open(io.BytesIO(data)).getexif().get_ifd(ExifTags.IFD.GPSInfo)  # fixture has GPS
    result = run("image", data)
    assert outcome(result) == "ready"
    for name in ("thumbnail", "sanitized"):
        with Image.open(result.files[name]) as im:
            exif = im.getexif()
            assert not exif.get_ifd(ExifTags.IFD.GPSInfo), name
            assert ExifTags.Base.Make not in exif and "comment" not in im.info, name
    raw = result.files["sanitized"].read_bytes()
    assert b"SpyCam" not in raw and b"secret comment" not in raw
    # lossless: the sanitized JPEG decodes to exactly the same pixels
    assert Image.open(result.files["sanitized"]).tobytes() == Image.open(io.BytesIO(data)).tobytes()


@pytest.mark.parametrize("variant", ["baseline", "progressive", "restarts", "fill_bytes"])
def test_sanitized_jpeg_keeps_every_scan_byte_and_nothing_after_eoi(run, variant: str) -> None:
    noisy = Image.effect_noise((96, 64), 80).convert("RGB")  # many FF bytes, stuffed as FF00
    params = {"progressive": {"progressive": True}, "restarts": {"restart_marker_blocks": 1}}
    data = _encode(noisy, "JPEG", quality=95, comment=b"secret", **params.get(variant, {}))
    if variant == "fill_bytes":
        data = data.replace(b"\xff\xda", b"\xff\xff\xff\xda", 1)  # fill before SOS
    data += b"appended secret"
    result = run("image", data)
    assert outcome(result) == "ready", result.message
    clean = result.files["sanitized"].read_bytes()
    assert b"secret" not in clean and clean.endswith(b"\xff\xd9")
    assert Image.open(io.BytesIO(clean)).tobytes() == Image.open(io.BytesIO(data)).tobytes()


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "GIF"])
def test_nothing_to_strip_keeps_the_file_byte_for_byte(run, fmt: str) -> None:
    im = Image.effect_noise((64, 48), 60).convert("RGB")
    data = _encode(im.convert("P") if fmt == "GIF" else im, fmt)
    result = run("image", data)
    assert outcome(result) == "ready", result.message
    assert result.files["sanitized"].read_bytes() == data
    assert result.data["sanitized_sha256"] == hashlib.sha256(data).hexdigest()


def test_orientation_6_thumbnail_is_rotated_and_sanitized_keeps_only_orientation(run) -> None:
    data = _jpeg_with_exif((40, 20), orientation=6, gps=True)
    result = run("image", data)
    assert outcome(result) == "ready"
    assert (result.data["width"], result.data["height"]) == (20, 40)
    with Image.open(result.files["thumbnail"]) as thumb:
        assert thumb.size == (20, 40)
        rgb = thumb.convert("RGB")
        top, bottom = rgb.getpixel((10, 2)), rgb.getpixel((10, 37))
        assert top[0] > 200 and top[2] < 60  # the red left half is on top after a 90° turn
        assert bottom[2] > 200 and bottom[0] < 60
    with Image.open(result.files["sanitized"]) as clean:
        exif = clean.getexif()
        assert dict(exif) == {ExifTags.Base.Orientation: 6}
        assert not exif.get_ifd(ExifTags.IFD.GPSInfo)


def test_png_webp_gif_metadata_is_stripped_losslessly(run) -> None:
    from PIL import PngImagePlugin

    im = Image.new("RGBA", (30, 20), (10, 200, 30, 128))
    exif = Image.Exif()
    exif[ExifTags.Base.Make] = "SpyCam"
    info = PngImagePlugin.PngInfo()
    info.add_text("Author", "SpyCam")
    info.add_itxt("Where", "SpyCam", zip=True)
    cases = {
        "png": _encode(im, "PNG", pnginfo=info, exif=exif),
        "webp": _encode(im, "WEBP", lossless=True, exif=exif, xmp=b"<x:xmpmeta>SpyCam</x:xmpmeta>"),
        "gif": _encode(im.convert("P"), "GIF", comment=b"SpyCam"),
    }
    for fmt, data in cases.items():
        assert b"SpyCam" in data, fmt
        result = run("image", data, name=f"meta.{fmt}")
        assert outcome(result) == "ready", (fmt, result.message)
        clean = result.files["sanitized"].read_bytes()
        assert b"SpyCam" not in clean, fmt
        original = Image.open(io.BytesIO(data)).convert("RGBA").tobytes()
        assert Image.open(io.BytesIO(clean)).convert("RGBA").tobytes() == original, fmt


def test_animated_gif_thumbnail_is_frame_zero(run) -> None:
    frames = [Image.new("RGB", (20, 20), c) for c in ("red", "lime", "blue")]
    data = _encode(frames[0], "GIF", save_all=True, append_images=frames[1:], loop=0)
    result = run("image", data)
    assert outcome(result) == "ready" and result.data["frames"] == 3
    assert Image.open(result.files["thumbnail"]).convert("RGB").getpixel((5, 5))[0] > 200
    assert Image.open(result.files["sanitized"]).n_frames == 3


@pytest.mark.parametrize("cut", [0.5, 0.9])
def test_truncated_jpeg_is_corrupt(run, cut: float) -> None:
    data = _encode(Image.effect_noise((64, 64), 50).convert("RGB"), "JPEG")
    assert outcome(run("image", data[: int(len(data) * cut)])) == "rejected:corrupt"


def test_png_whose_pixels_fail_to_inflate_is_corrupt(run) -> None:
    # Pillow's PNG getexif() decodes the pixels; a decode error there used to be read as
    # "no metadata", and the half-black image that load() leaves behind was thumbnailed.
    assert outcome(run("image", noisy_png())) == "ready"
    assert outcome(run("image", with_invalid_deflate(noisy_png()))) == "rejected:corrupt"


@pytest.mark.parametrize("mode", ["I;16", "1", "LA", "P", "L", "CMYK"])
def test_uncommon_modes_thumbnail_with_their_tones(run, mode: str) -> None:
    value = {"I;16": 40_000, "1": 1, "LA": (200, 255), "P": 7, "L": 200, "CMYK": (0, 0, 0, 55)}
    fmt = "JPEG" if mode == "CMYK" else "PNG"
    result = run("image", _encode(Image.new(mode, (300, 100), value[mode]), fmt))
    assert outcome(result) == "ready", result.message
    with Image.open(result.files["thumbnail"]) as thumb:
        assert thumb.size == (256, 85)
        if mode in ("I;16", "L", "LA", "CMYK"):
            grey = thumb.convert("L").getpixel((5, 5))
            assert 140 < grey < 230, grey  # not clipped to white, not black


@pytest.mark.parametrize("mode", ["I;16", "1", "LA", "P", "L", "CMYK", "RGBA"])
def test_wide_images_in_every_mode_thumbnail(run, mode: str) -> None:
    # Wider than twice the thumbnail, so thumbnail() reduces first: reduce() has no I;16
    # path, and a valid 16-bit greyscale PNG was rejected/corrupt ("image has wrong mode").
    value = {
        "I;16": 40_000,
        "1": 1,
        "LA": (200, 255),
        "P": 7,
        "L": 200,
        "CMYK": (0, 0, 0, 55),
        "RGBA": (200, 200, 200, 255),
    }
    fmt = "JPEG" if mode == "CMYK" else "PNG"
    result = run("image", _encode(Image.new(mode, (1200, 400), value[mode]), fmt))
    assert outcome(result) == "ready", result.message
    with Image.open(result.files["thumbnail"]) as thumb:
        assert thumb.size == (256, 85)
        if mode not in ("P", "1"):
            assert 140 < thumb.convert("L").getpixel((5, 5)) < 230  # tone kept, not clipped


@pytest.mark.parametrize("mode", ["I;16", "I;16B", "I;16L", "I"])
def test_high_depth_modes_reduce_to_a_grey_thumbnail(mode: str) -> None:
    # Every 16/32-bit integer grey mode Pillow has, not only what PNG opens as (I;16).
    from processing.sandbox.images import _thumbnail

    im = Image.new(mode, (1600, 800), 40_000)
    thumb = _thumbnail(im, 256, 1)
    assert thumb.size == (256, 128) and thumb.mode == "RGB"
    assert 140 < thumb.convert("L").getpixel((5, 5)) < 230


def test_not_an_allowed_format_is_corrupt(run) -> None:
    # Decoders beyond the allowlist (EPS would run Ghostscript) are never reached.
    for data in (_encode(Image.new("RGB", (4, 4)), "BMP"), b"%!PS-Adobe-3.0 EPSF-3.0\n", b""):
        assert outcome(run("image", data)) == "rejected:corrupt"
