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
import zlib
from collections.abc import Callable
from pathlib import Path

import inflate64
import pillow_heif
from PIL import Image

pillow_heif.register_heif_opener()  # Image.save(..., "HEIF")

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
    im = Image.merge(
        "LA", (Image.linear_gradient("L").resize((W, H)), Image.linear_gradient("L").rotate(90).resize((W, H)))
    )
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


# Hand-built ZIPs: what zipfile cannot write (Deflate64) or will not (parts that disagree).
DOS_DATE, DOS_TIME = ((2026 - 1980) << 9) | (1 << 5) | 1, 0  # EPOCH
FIELDS = ("name", "method", "flags", "crc", "csize", "size")


def member(name: str, payload: bytes, method: int = 8, **extra: object) -> dict:
    """One entry's fields and stored bytes: method 0 (stored), 8 (deflate) or 9 (Deflate64)."""
    if method == 8:
        packer = zlib.compressobj(9, zlib.DEFLATED, -15)
        data = packer.compress(payload) + packer.flush()
    elif method == 9:
        deflater = inflate64.Deflater()
        data = deflater.deflate(payload) + deflater.flush()
    else:
        data = payload
    fields = {"name": name.encode(), "method": method, "flags": 0, "crc": zlib.crc32(payload)}
    return fields | {"csize": len(data), "size": len(payload), "data": data} | extra


def local_header(*, name: bytes, method: int, flags: int, crc: int, csize: int, size: int, extra: bytes = b"") -> bytes:
    head = struct.pack(
        "<4sHHHHHIIIHH", b"PK\x03\x04", 20, flags, method, DOS_TIME, DOS_DATE, crc, csize, size, len(name), len(extra)
    )
    return head + name + extra


def central_record(
    *, name: bytes, method: int, flags: int, crc: int, csize: int, size: int, offset: int, extra: bytes = b""
) -> bytes:
    head = struct.pack(
        "<4sBBHHHHHIIIHHHHHII",
        b"PK\x01\x02",
        20,
        0,  # made by: MS-DOS (FAT), as Windows' own zip does
        20,
        flags,
        method,
        DOS_TIME,
        DOS_DATE,
        crc,
        csize,
        size,
        len(name),
        len(extra),
        0,
        0,
        0,
        0,
        offset,
    )
    return head + name + extra


def end_record(count: int, cd_size: int, cd_offset: int, comment: bytes = b"") -> bytes:
    return struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, count, count, cd_size, cd_offset, len(comment)) + comment


def hand_zip(members: list[dict], *, listed: list[int] | None = None, comment: bytes = b"") -> bytes:
    """Local entries in order, then a directory of the `listed` ones (all by default).

    A member's `local` / `central` dicts override its fields in that header only;
    `descriptor` is written after its data.
    """
    out, records = bytearray(), []
    for m in members:
        offset = len(out)
        out += local_header(**({k: m[k] for k in FIELDS} | m.get("local", {})))
        out += m["data"] + m.get("descriptor", b"")
        records.append(central_record(**({k: m[k] for k in FIELDS} | m.get("central", {})), offset=offset))
    chosen = range(len(members)) if listed is None else listed
    directory = b"".join(records[i] for i in chosen)
    return bytes(out + directory + end_record(len(chosen), len(directory), len(out), comment))


README = b"Quarterly figures, see the attached sheets.\r\n" * 20


def zip_stored_over_deflate() -> bytes:
    # The directory says stored: a reader of it gets the raw deflate bytes (CRC and size
    # made to match them). The local header says deflate: a reader of it gets EICAR.
    m = member("tools/eicar.com", EICAR)
    raw = {"method": 0, "crc": zlib.crc32(m["data"]), "size": m["csize"]}
    return hand_zip([member("README.txt", README), m | {"central": raw}])


def zip_local_entry_unlisted() -> bytes:
    # Two local entries; the directory lists only the first.
    return hand_zip([member("README.txt", README), member("tools/eicar.com", EICAR)], listed=[0])


def zip_concatenated() -> bytes:
    # A ZIP holding EICAR, then a benign ZIP: a reader of the last end record sees only
    # the benign one (zipfile and Info-ZIP shift its offsets past the prepended bytes).
    return _zip([("tools/eicar.com", EICAR)]) + _zip([("README.txt", README)])


WINDOWS_FOLDER = [
    ("report/", b""),
    ("report/summary.txt", README),
    ("report/data.csv", b"".join(b"%d,%d,%d\r\n" % (i, i * i, i % 7) for i in range(4000))),
]


def zip_deflate64() -> bytes:
    # What Windows' "Send to > Compressed folder" writes for a large folder: Deflate64 members.
    return hand_zip([member(name, data, method=0 if name.endswith("/") else 9) for name, data in WINDOWS_FOLDER])


def eicar_in_deflate64_zip() -> bytes:
    return hand_zip([member("README.txt", README, method=9), member("tools/eicar.com", EICAR, method=9)])


def png_hides_elf() -> bytes:
    # A valid PNG with a (header-only) x86-64 ELF executable appended after IEND.
    elf = b"\x7fELF\x02\x01\x01\x00" + bytes(8) + struct.pack("<HH", 2, 62) + bytes(44)
    return _save(Image.linear_gradient("L").resize((W, H)), "PNG") + elf


# Phone formats. No free real HEIC with GPS exists to copy, so we encode them: pillow-heif
# (libheif + x265) for HEIC, Pillow's own libavif (aom) for AVIF; both are deterministic.
# The photo as it must be *displayed* is 480x640 (portrait) with a red square top-left
# and a blue one bottom-right; the stored pixels are that photo turned so that only
# applying the orientation (HEIF irot, written by the encoder from the EXIF Orientation)
# puts the red square back top-left.
GPS = {1: "N", 2: (48.0, 51.0, 29.0), 3: "E", 4: (2.0, 17.0, 40.0), 5: 0, 6: 35.0}
XMP_GPS = (
    b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
    b'<rdf:Description rdf:about="" xmlns:exif="http://ns.adobe.com/exif/1.0/" '
    b'exif:GPSLatitude="48,51.4833N" exif:GPSLongitude="2,17.6667E"/></rdf:RDF></x:xmpmeta>'
)


def _displayed_photo() -> Image.Image:
    im = Image.linear_gradient("L").resize((480, 640)).convert("RGB")
    im.paste((255, 0, 0), (0, 0, 96, 96))
    im.paste((0, 0, 255), (384, 544, 480, 640))
    return im


def _phone_exif(orientation: int) -> bytes:
    exif = Image.Exif()
    exif[0x010F] = "Airlock"  # Make
    exif[0x0110] = "corpus generator"  # Model
    exif[0x0112] = orientation
    exif[0x8825] = GPS  # GPS IFD: latitude/longitude/altitude of a place in Paris
    return exif.tobytes()


def heic_gps_rotated() -> bytes:
    # Orientation 6 ("rotate 90 clockwise to display"): stored turned 90 counter-clockwise.
    stored = _displayed_photo().transpose(Image.Transpose.ROTATE_90)
    return _save(stored, "HEIF", quality=70, exif=_phone_exif(6), xmp=XMP_GPS)


def avif_gps_rotated() -> bytes:
    # Orientation 8 ("rotate 90 counter-clockwise to display"); Pillow writes it as irot.
    stored = _displayed_photo().transpose(Image.Transpose.ROTATE_270)
    return _save(stored, "AVIF", quality=60, speed=8, max_threads=1, exif=_phone_exif(8), xmp=XMP_GPS)


def heic_multi() -> bytes:
    # Three images, the primary one (index 1, green, 400x300) in the middle, as a burst or
    # a Live Photo still would be: only the primary may be decoded and shown.
    images = [
        Image.new("RGB", (320, 240), (0, 0, 255)),
        Image.new("RGB", (400, 300), (0, 200, 0)),
        Image.new("RGB", (200, 100), (255, 0, 0)),
    ]
    heif = pillow_heif.from_pillow(images[0])
    for im in images[1:]:
        heif.add_from_pillow(im)
    buf = io.BytesIO()
    heif.save(buf, quality=60, primary_index=1)
    return buf.getvalue()


def heic_ispe_100k() -> bytes:
    # A valid 64x48 HEIC whose ispe property claims 100,000 x 100,000 (10 Gpx): edited
    # bytes, since no encoder writes a lie.
    data = bytearray(_save(Image.new("RGB", (64, 48), (128, 128, 128)), "HEIF", quality=50))
    at = data.find(b"ispe")
    if at < 0 or data.find(b"ispe", at + 4) >= 0:
        raise RuntimeError("expected exactly one ispe box")
    data[at + 8 : at + 16] = struct.pack(">II", 100_000, 100_000)  # after the FullBox version/flags
    return bytes(data)


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
    "zip_stored_over_deflate.zip": zip_stored_over_deflate,
    "zip_local_entry_unlisted.zip": zip_local_entry_unlisted,
    "zip_concatenated.zip": zip_concatenated,
    "zip_deflate64.zip": zip_deflate64,
    "eicar_in_deflate64_zip.zip": eicar_in_deflate64_zip,
    "heic_gps_rotated.heic": heic_gps_rotated,
    "avif_gps_rotated.avif": avif_gps_rotated,
    "heic_multi.heic": heic_multi,
    "heic_ispe_100k.heic": heic_ispe_100k,
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
