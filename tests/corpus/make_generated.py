"""Make the corpus files we generate ourselves (tests/corpus/files/generated/).

    .venv/bin/python tests/corpus/make_generated.py

Deterministic: the same files, byte for byte, on every run (fixed timestamps, fixed
pixel patterns), so the sha256 column of MANIFEST.tsv stays valid. Prints one manifest
row per file; the rows themselves are kept in MANIFEST.tsv by hand.
"""

from __future__ import annotations

import hashlib
import io
import struct
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

from PIL import Image

OUT = Path(__file__).resolve().parent / "files" / "generated"
EPOCH = (2026, 1, 1, 0, 0, 0)


def _zip(entries: list[tuple[str, bytes]], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as zf:
        for name, data in entries:
            zf.writestr(zipfile.ZipInfo(name, EPOCH), data, compress_type=method)
    return buf.getvalue()


def lie_about_size(data: bytes, declared: int) -> bytes:
    """Set every entry's uncompressed size, in the local header and the central directory."""
    out = bytearray(data)
    for sig, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        pos = out.find(sig)
        while pos != -1:
            out[pos + offset : pos + offset + 4] = struct.pack("<I", declared)
            pos = out.find(sig, pos + 4)
    return bytes(out)


def zip_lying_deflate() -> bytes:
    # 200 MiB of zeros deflate to ~200 KB; the archive says 100 KiB (ratio under 1).
    return lie_about_size(_zip([("report.txt", bytes(200 << 20))]), 100 << 10)


def zip_lying_stored() -> bytes:
    # A stored entry holding 64 KiB that declares 16 bytes.
    return lie_about_size(_zip([("notes.txt", b"A" * (64 << 10))], zipfile.ZIP_STORED), 16)


def zip_lying_nested() -> bytes:
    # An honest outer archive holding an inner zip whose one entry declares 0 bytes
    # and inflates to 8 MiB.
    inner = lie_about_size(_zip([("empty.txt", bytes(8 << 20))]), 0)
    return _zip([("inner.zip", inner), ("readme.txt", b"see inner.zip\n")], zipfile.ZIP_STORED)


# Images in the modes a decoder tends to forget, each wider than twice the 256 px
# thumbnail (so it is reduced, not only resampled), made with Pillow.
W, H = 720, 480


def _save(im: Image.Image, fmt: str, **params: object) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **params)
    return buf.getvalue()


def _gray16() -> Image.Image:
    # A diagonal ramp over the whole 16-bit range: values above 255 everywhere but the corner.
    samples = ((x * 65535 // W + y * 40) % 65536 for y in range(H) for x in range(W))
    return Image.frombytes("I;16", (W, H), b"".join(struct.pack("<H", v) for v in samples))


def png_gray16() -> bytes:
    # PNG stores 16-bit samples big-endian whatever the source (an I;16B image saves to
    # these same bytes); Pillow opens the file as I;16.
    return _save(_gray16(), "PNG")


def png_gray16_transparent() -> bytes:
    return _save(_gray16(), "PNG", transparency=0)  # tRNS: one grey value is transparent


def png_la() -> bytes:
    im = Image.merge("LA", (Image.linear_gradient("L").resize((W, H)),
                            Image.linear_gradient("L").rotate(90).resize((W, H))))
    return _save(im, "PNG")


def png_palette_transparent() -> bytes:
    im = Image.linear_gradient("L").resize((W, H)).quantize(64)
    return _save(im, "PNG", transparency=0)  # palette entry 0 transparent (tRNS)


def jpeg_cmyk() -> bytes:
    c = Image.linear_gradient("L").resize((W, H))
    im = Image.merge("CMYK", (c, c.rotate(90).resize((W, H)), Image.new("L", (W, H), 40), c.point(lambda v: v // 4)))
    return _save(im, "JPEG", quality=85)


# Assembled at run time so this script is not itself flagged by antivirus software.
EICAR = b"X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR" + b"-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"


def eicar_in_zip() -> bytes:
    return _zip([("README.txt", b"release notes\n"), ("tools/eicar.com", EICAR)])


def eicar_in_nested_zip() -> bytes:
    inner = _zip([("eicar.com", EICAR)], zipfile.ZIP_STORED)
    return _zip([("backup/2026.zip", inner), ("index.txt", b"one backup\n")])


def png_hides_elf() -> bytes:
    # A valid PNG with a (header-only) x86-64 ELF executable appended after IEND.
    elf = b"\x7fELF\x02\x01\x01\x00" + bytes(8) + struct.pack("<HH", 2, 62) + bytes(44)
    return _save(Image.linear_gradient("L").resize((W, H)), "PNG") + elf


FILES: dict[str, Callable[[], bytes]] = {
    "zip_lying_size_deflate.zip": zip_lying_deflate,
    "zip_lying_size_stored.zip": zip_lying_stored,
    "zip_lying_size_nested.zip": zip_lying_nested,
    "png_gray16.png": png_gray16,
    "png_gray16_transparent.png": png_gray16_transparent,
    "png_la.png": png_la,
    "png_palette_transparent.png": png_palette_transparent,
    "jpeg_cmyk.jpg": jpeg_cmyk,
    "eicar_in_zip.zip": eicar_in_zip,
    "eicar_in_nested_zip.zip": eicar_in_nested_zip,
    "png_hides_elf.png": png_hides_elf,
}


def main(names: list[str]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, make in FILES.items():
        if names and name not in names:
            continue
        data = make()
        (OUT / name).write_bytes(data)
        print(f"generated/{name}\t{len(data)}\t{hashlib.sha256(data).hexdigest()}")


if __name__ == "__main__":
    main(sys.argv[1:])
