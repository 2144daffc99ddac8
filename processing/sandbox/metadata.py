"""Lossless metadata stripping for the "sanitized" image rendition.

Each function walks the container structure and copies only an allowlist of segments or
chunks, so pixels are never re-encoded (no quality loss, and 10x cheaper than a Pillow
round trip). Anything after the format's end marker (appended payloads, polyglot tails,
MPF secondary images) is dropped. A structure that cannot be walked raises ValueError,
which the caller turns into rejected/corrupt.

Policy per format:
- JPEG: keep APP0 JFIF/JFXX, APP2 ICC_PROFILE, APP14 Adobe (needed for CMYK colours) and
  every non-APP marker; drop APP1 (EXIF/XMP), APP13 (IPTC), COM and all other APPn (MPF,
  Ducky, ...). Orientation is kept by writing a minimal EXIF APP1 holding only Orientation.
- PNG: keep critical chunks and a list of rendering-relevant ancillary chunks (colour,
  transparency, APNG animation); drop eXIf/tEXt/zTXt/iTXt/tIME and anything unknown.
  A non-default orientation is re-emitted as a minimal eXIf chunk.
- WebP: keep VP8X/ICCP/ANIM/ANMF/ALPH/VP8/VP8L, drop EXIF/XMP and unknown chunks, fix the
  VP8X flags and the RIFF size; orientation again as a minimal EXIF chunk.
- GIF: keep image blocks, graphic control extensions and the NETSCAPE/ANIMEXTS looping
  extension; drop comments, plain-text and other application extensions (XMP, ICC).
"""

from __future__ import annotations

import re
import struct
import zlib

ORIENTATION_TAG = 0x0112


class _Output:
    """The stripped file as spans of the original plus inserted bytes.

    Spans are memoryview slices, so the image data (megabytes) is copied once, by the
    final join, and not at all when nothing was dropped or inserted: then the original
    bytes object itself is the result. Adjacent spans merge, which is what makes
    "nothing changed" visible as a single span covering the whole input.
    """

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.parts: list[tuple[int, int] | bytes] = []

    def span(self, start: int, end: int) -> None:
        last = self.parts[-1] if self.parts else None
        if isinstance(last, tuple) and last[1] == start:
            self.parts[-1] = (last[0], end)
        else:
            self.parts.append((start, end))

    def insert(self, raw: bytes) -> None:
        self.parts.append(raw)

    def result(self) -> bytes:
        if self.parts == [(0, len(self.data))]:
            return self.data
        view = memoryview(self.data)
        return b"".join(view[p[0] : p[1]] if isinstance(p, tuple) else p for p in self.parts)


def orientation_tiff(orientation: int) -> bytes:
    """A big-endian TIFF header with one IFD holding only the Orientation SHORT."""
    return struct.pack(">2sHIHHHIHHI", b"MM", 42, 8, 1, ORIENTATION_TAG, 3, 1, orientation, 0, 0)


# ---------------------------------------------------------------- JPEG
_JPEG_KEEP_APP = {0xE0: (b"JFIF\0", b"JFXX\0"), 0xE2: (b"ICC_PROFILE\0",), 0xEE: (b"Adobe",)}


def _keep_jpeg_segment(marker: int, body: bytes) -> bool:
    if marker == 0xFE:  # COM
        return False
    if 0xE0 <= marker <= 0xEF:
        return any(body.startswith(sig) for sig in _JPEG_KEEP_APP.get(marker, ()))
    return True


# A marker that ends entropy-coded data: FF followed by anything but a stuffed 00, a
# restart marker D0-D7 or another fill FF (those all belong to the scan). One regex
# search, in C, instead of a Python loop over every FF of the scan.
_SCAN_END = re.compile(rb"\xff[^\x00\xd0-\xd7\xff]")


def _skip_entropy(data: bytes, pos: int) -> int:
    """Return the offset of the next real marker after entropy-coded data starting at pos."""
    found = _SCAN_END.search(data, pos)
    if found is None:
        raise ValueError("JPEG: no end of image")
    return found.start()


def strip_jpeg(data: bytes, orientation: int = 1) -> bytes:
    if data[:2] != b"\xff\xd8":
        raise ValueError("JPEG: no SOI")
    out = _Output(data)
    out.span(0, 2)
    exif = b""
    if orientation != 1:
        tiff = b"Exif\0\0" + orientation_tiff(orientation)
        exif = b"\xff\xe1" + struct.pack(">H", len(tiff) + 2) + tiff
    kept = 0  # pieces kept after SOI: EXIF goes right after SOI, or after a leading JFIF

    def keep(start: int, end: int, jfif: bool = False) -> None:
        nonlocal kept
        kept += 1
        if kept == 1 and exif and not jfif:
            out.insert(exif)
        out.span(start, end)
        if kept == 1 and exif and jfif:
            out.insert(exif)

    pos = 2
    while True:
        if pos < len(data) and data[pos] != 0xFF:
            # libjpeg skips extraneous bytes before a marker (e.g. a short APP14): so do
            # we, and they are not copied, so nothing can hide in them.
            found = data.find(b"\xff", pos)
            pos = len(data) if found < 0 else found
        if pos >= len(data):
            raise ValueError("JPEG: marker expected")
        while pos < len(data) and data[pos] == 0xFF:
            pos += 1  # fill bytes: only the last FF is copied, with its marker
        if pos >= len(data):
            raise ValueError("JPEG: truncated marker")
        marker = data[pos]
        pos += 1
        if marker == 0xD9:  # EOI: anything after it is dropped
            keep(pos - 2, pos)
            break
        if 0xD0 <= marker <= 0xD7 or marker == 0x01:  # standalone markers
            keep(pos - 2, pos)
            continue
        if pos + 2 > len(data):
            raise ValueError("JPEG: truncated segment")
        (length,) = struct.unpack(">H", data[pos : pos + 2])
        if length < 2 or pos + length > len(data):
            raise ValueError("JPEG: bad segment length")
        body = data[pos + 2 : pos + min(length, 16)]  # the longest signature we compare
        if _keep_jpeg_segment(marker, body):
            keep(pos - 2, pos + length, jfif=marker == 0xE0)
        pos += length
        if marker == 0xDA:  # SOS: copy the scan's entropy-coded data verbatim
            end = _skip_entropy(data, pos)
            out.span(pos, end)
            pos = end
    return out.result()


# ---------------------------------------------------------------- PNG
_PNG_SIG = b"\x89PNG\r\n\x1a\n"
_PNG_KEEP = {
    b"IHDR",
    b"PLTE",
    b"IDAT",
    b"IEND",
    b"tRNS",
    b"gAMA",
    b"cHRM",
    b"sRGB",
    b"iCCP",
    b"sBIT",
    b"bKGD",
    b"pHYs",
    b"acTL",
    b"fcTL",
    b"fdAT",
    b"cICP",
    b"mDCV",
    b"cLLI",
}


def _png_chunk(ctype: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + ctype + body + struct.pack(">I", zlib.crc32(ctype + body))


def strip_png(data: bytes, orientation: int = 1) -> bytes:
    if not data.startswith(_PNG_SIG):
        raise ValueError("PNG: bad signature")
    out = _Output(data)
    pos = len(_PNG_SIG)
    out.span(0, pos)
    while True:
        if pos + 12 > len(data):
            raise ValueError("PNG: no IEND")
        length, ctype = struct.unpack_from(">I4s", data, pos)
        end = pos + 12 + length
        if end > len(data):
            raise ValueError("PNG: truncated chunk")
        if ctype in _PNG_KEEP:
            out.span(pos, end)
            if ctype == b"IHDR" and orientation != 1:
                out.insert(_png_chunk(b"eXIf", orientation_tiff(orientation)))
        pos = end
        if ctype == b"IEND":
            return out.result()


# ---------------------------------------------------------------- WebP
_WEBP_KEEP = {b"VP8X", b"ICCP", b"ANIM", b"ANMF", b"ALPH", b"VP8 ", b"VP8L"}
_VP8X_EXIF, _VP8X_XMP = 0x08, 0x04


def strip_webp(data: bytes, orientation: int = 1) -> bytes:
    if data[:4] != b"RIFF" or data[8:12] != b"WEBP":
        raise ValueError("WebP: bad header")
    (riff_size,) = struct.unpack("<I", data[4:8])
    end = min(len(data), 8 + riff_size)  # bytes past the RIFF size are a tail: dropped
    chunks: list[bytes] = []
    has_vp8x = False
    pos = 12
    while pos + 8 <= end:
        fourcc = data[pos : pos + 4]
        (size,) = struct.unpack("<I", data[pos + 4 : pos + 8])
        if pos + 8 + size > end:
            raise ValueError("WebP: truncated chunk")
        padded = size + (size & 1)
        chunk = data[pos : pos + 8 + size] + b"\0" * (size & 1)
        pos += 8 + padded
        if fourcc not in _WEBP_KEEP:
            continue
        if fourcc == b"VP8X":
            if size < 10:
                raise ValueError("WebP: short VP8X")
            has_vp8x = True
            flags = chunk[8] & ~(_VP8X_EXIF | _VP8X_XMP)
            if orientation != 1:
                flags |= _VP8X_EXIF
            chunk = chunk[:8] + bytes((flags,)) + chunk[9:]
        chunks.append(chunk)
    if not chunks:
        raise ValueError("WebP: no image data")
    if has_vp8x and orientation != 1:
        tiff = orientation_tiff(orientation)
        chunks.append(b"EXIF" + struct.pack("<I", len(tiff)) + tiff)  # even length: no pad
    body = b"WEBP" + b"".join(chunks)
    return b"RIFF" + struct.pack("<I", len(body)) + body


# ---------------------------------------------------------------- GIF
_GIF_LOOP_APPS = (b"NETSCAPE2.0", b"ANIMEXTS1.0")


def skip_sub_blocks(data: bytes, pos: int) -> int:
    while True:
        n = data[pos]  # IndexError on truncation, mapped to ValueError by the caller
        pos += 1
        if n == 0:
            return pos
        pos += n


def strip_gif(data: bytes) -> tuple[bytes, int]:
    """Return the stripped GIF and the number of image blocks (frames) it holds."""
    if data[:6] not in (b"GIF87a", b"GIF89a") or len(data) < 13:
        raise ValueError("GIF: bad header")
    flags = data[10]
    pos = 13 + (3 * (2 << (flags & 7)) if flags & 0x80 else 0)
    out = _Output(data)
    out.span(0, pos)
    frames = 0
    try:
        while True:
            block = data[pos]
            if block == 0x3B:  # trailer: anything after it is dropped
                out.span(pos, pos + 1)
                return out.result(), frames
            if block == 0x21:
                label = data[pos + 1]
                end = skip_sub_blocks(data, pos + 2)
                is_loop = label == 0xFF and data[pos + 3 : pos + 14] in _GIF_LOOP_APPS
                if label == 0xF9 or is_loop:
                    out.span(pos, end)
            elif block == 0x2C:
                iflags = data[pos + 9]
                start = pos + 10 + (3 * (2 << (iflags & 7)) if iflags & 0x80 else 0)
                end = skip_sub_blocks(data, start + 1)  # +1: LZW minimum code size byte
                out.span(pos, end)
                frames += 1
            else:
                raise ValueError("GIF: unknown block")
            if end > len(data):
                raise ValueError("GIF: truncated block")
            pos = end
    except IndexError:
        raise ValueError("GIF: truncated") from None
