"""HEIF/AVIF container facts read from the boxes themselves, before any decoder sees them.

HEIC, HEIF and AVIF are ISO base media files (ISO/IEC 14496-12, 23008-12): an `ftyp` box
naming brands, then a `meta` box whose `pitm` names the primary item and whose
`iprp/ipco` holds properties (`ispe`: width x height) tied to items by `iprp/ipma`.
Everything here is a bounded walk over bytes in memory: no allocation follows a size
field, so a header claiming 100,000 x 100,000 pixels costs nothing to read. A structure
that cannot be walked raises ValueError (the caller's rejected/corrupt).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

# Brands (ftyp) -> the MIME type we call the file. Image brands only: the sequence brands
# (hevc, hevx, avis is the exception below) are videos, not photos.
HEIC_BRANDS = (b"heic", b"heix", b"heim", b"heis")
AVIF_BRANDS = (b"avif", b"avis")  # avis: an image sequence; only its primary image is used
GENERIC_BRANDS = (b"mif1", b"msf1")

_MAX_BOXES = 10_000  # per container level: a flood of tiny boxes is corrupt, not slow


def brands(head: bytes) -> tuple[bytes, list[bytes]] | None:
    """(major brand, compatible brands) of a leading `ftyp` box, or None."""
    if len(head) < 16 or head[4:8] != b"ftyp":
        return None
    size = int.from_bytes(head[0:4], "big")
    if size < 16 or size > len(head):
        size = len(head)  # a truncated head (intake reads 4100 bytes): use what is there
    compatible = [head[pos : pos + 4] for pos in range(16, size - 3, 4)]
    return head[8:12], compatible


def mime_type(head: bytes) -> str | None:
    """image/heic, image/avif or image/heif from the brands; None for anything else."""
    found = brands(head)
    if found is None:
        return None
    major, compatible = found
    if major in HEIC_BRANDS:
        return "image/heic"
    if major in AVIF_BRANDS:
        return "image/avif"
    if major in GENERIC_BRANDS:
        if any(b in AVIF_BRANDS for b in compatible):
            return "image/avif"
        if any(b in HEIC_BRANDS for b in compatible):
            return "image/heic"
        return "image/heif"
    return None


def _boxes(data: bytes, start: int, end: int) -> list[tuple[bytes, int, int]]:
    """(type, payload start, payload end) of each box in data[start:end]."""
    out: list[tuple[bytes, int, int]] = []
    pos = start
    while pos + 8 <= end:
        if len(out) >= _MAX_BOXES:
            raise ValueError("too many boxes")
        size, kind = struct.unpack_from(">I4s", data, pos)
        header = 8
        if size == 1:
            if pos + 16 > end:
                raise ValueError("truncated box header")
            (size,) = struct.unpack_from(">Q", data, pos + 8)
            header = 16
        elif size == 0:
            size = end - pos  # "to the end of the enclosing container"
        if size < header or pos + size > end:
            raise ValueError(f"box {kind!r} overruns its container")
        out.append((kind, pos + header, pos + size))
        pos += size
    return out


def _child(boxes: list[tuple[bytes, int, int]], kind: bytes) -> tuple[int, int] | None:
    for name, start, end in boxes:
        if name == kind:
            return start, end
    return None


@dataclass(frozen=True)
class Probe:
    """What the container says about its images, before decoding."""

    primary: tuple[int, int] | None  # the primary item's ispe (as stored, before irot)
    sizes: list[tuple[int, int]] = field(default_factory=list)  # every ispe in the file


def _ipma(data: bytes, start: int, end: int) -> dict[int, list[int]]:
    """item id -> 1-based property indices (ipco order)."""
    version, flags = data[start], int.from_bytes(data[start + 1 : start + 4], "big")
    pos = start + 4
    (count,) = struct.unpack_from(">I", data, pos)
    pos += 4
    out: dict[int, list[int]] = {}
    for _ in range(count):
        if version < 1:
            (item,) = struct.unpack_from(">H", data, pos)
            pos += 2
        else:
            (item,) = struct.unpack_from(">I", data, pos)
            pos += 4
        n = data[pos]
        pos += 1
        indices = []
        for _ in range(n):
            if flags & 1:
                (raw,) = struct.unpack_from(">H", data, pos)
                pos += 2
                indices.append(raw & 0x7FFF)
            else:
                indices.append(data[pos] & 0x7F)
                pos += 1
        if pos > end:
            raise ValueError("ipma overruns its box")
        out[item] = indices
    return out


def probe(data: bytes) -> Probe:
    """The primary image's declared size and every declared size, from the boxes only."""
    try:
        meta = _child(_boxes(data, 0, len(data)), b"meta")
        if meta is None:
            raise ValueError("no meta box")
        children = _boxes(data, meta[0] + 4, meta[1])  # meta is a FullBox: skip version/flags
        pitm = _child(children, b"pitm")
        primary_id = None
        if pitm is not None:
            fmt = ">H" if data[pitm[0]] == 0 else ">I"
            (primary_id,) = struct.unpack_from(fmt, data, pitm[0] + 4)
        iprp = _child(children, b"iprp")
        if iprp is None:
            raise ValueError("no item properties")
        iprp_boxes = _boxes(data, *iprp)
        ipco = _child(iprp_boxes, b"ipco")
        if ipco is None:
            raise ValueError("no item property container")
        properties = _boxes(data, *ipco)
        sizes: dict[int, tuple[int, int]] = {}  # 1-based ipco index -> (width, height)
        for index, (kind, start, end) in enumerate(properties, start=1):
            if kind == b"ispe":
                if end - start < 12:
                    raise ValueError("short ispe")
                sizes[index] = struct.unpack_from(">II", data, start + 4)
        associations: dict[int, list[int]] = {}
        for kind, start, end in iprp_boxes:
            if kind == b"ipma":
                associations.update(_ipma(data, start, end))
    except (struct.error, IndexError):
        raise ValueError("truncated HEIF structure") from None
    primary = None
    if primary_id is not None:
        primary = next((sizes[i] for i in associations.get(primary_id, []) if i in sizes), None)
    return Probe(primary=primary, sizes=list(sizes.values()))
