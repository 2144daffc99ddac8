"""One reading of a ZIP: the central directory, the local headers and every byte between.

Extractors disagree about a ZIP whose parts disagree: Info-ZIP and Python read the
central directory found from the last end record, Java's ZipInputStream walks the local
headers from offset 0. A file passes here only when both readings give the same entries:

- exactly one end record, at the end of the file: after it only the ZIP comment its
  length field declares (that comment may not hold an end-record signature, which a
  reader searching backwards would take instead); a ZIP64 end record and locator, where
  used, sit between the central directory and the end record, each where the other says;
- the central directory ends exactly where the (ZIP64) end record begins, holds exactly
  the declared number of records and nothing else (no prepended data tolerated);
- each entry's local header agrees with its directory record: method, flags, name, and
  CRC-32 and both sizes; with flag bit 3 (sizes after the data) the header's CRC and
  sizes are each 0 or the directory's, and the data descriptor after the data agrees;
- the entries (local header, name, extra, data, descriptor) cover the file from offset 0
  to the start of the central directory with no gap (a gap is where a local entry no
  directory record lists hides) and no overlap (a non-recursive zip bomb).

Failures are rejected/archive_uninspectable with the rule in the message; overlaps stay
archive_limit (a bomb), and a file that is no ZIP at all, truncated, spanned or whose
directory points at no local header is corrupt. Parsing is bounded: fixed-size reads,
one record at a time, at most max_entries + 1 directory records.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace
from typing import IO

from .outcome import Rejected, short_repr

EOCD = b"PK\x05\x06"
ZIP64_EOCD = b"PK\x06\x06"
ZIP64_LOCATOR = b"PK\x06\x07"
CENTRAL = b"PK\x01\x02"
LOCAL = b"PK\x03\x04"
DESCRIPTOR = b"PK\x07\x08"
EOCD_SIZE = 22
MAX_COMMENT = 0xFFFF
U16, U32 = 0xFFFF, 0xFFFFFFFF
FLAG_ENCRYPTED = 0x1
FLAG_DESCRIPTOR = 0x8
FLAG_UTF8 = 0x800

_EOCD = struct.Struct("<4sHHHHIIH")
_ZIP64_EOCD = struct.Struct("<4sQHHIIQQQQ")
_ZIP64_LOCATOR = struct.Struct("<4sIQI")
_CENTRAL = struct.Struct("<4sBBHHHHHIIIHHHHHII")
_LOCAL = struct.Struct("<4sHHHHHIIIHH")


@dataclass(frozen=True)
class Entry:
    """One entry as both readings agree it is."""

    name: str
    raw_name: bytes
    method: int
    flags: int
    crc: int
    compress_size: int
    file_size: int
    header_offset: int
    create_system: int
    external_attr: int
    data_offset: int = 0  # set once the local header is read

    @property
    def encrypted(self) -> bool:
        return bool(self.flags & FLAG_ENCRYPTED)


@dataclass(frozen=True)
class Directory:
    entries: list[Entry]
    cd_offset: int
    comment_length: int


def _uninspectable(message: str) -> Rejected:
    return Rejected("archive_uninspectable", message)


def _corrupt(message: str) -> Rejected:
    return Rejected("corrupt", message)


def _read(fh: IO[bytes], offset: int, n: int) -> bytes:
    fh.seek(offset)
    return fh.read(n)


def _find_end_record(fh: IO[bytes], size: int) -> tuple[int, tuple[int, ...]]:
    """The one end record whose comment reaches exactly the end of the file."""
    start = max(0, size - EOCD_SIZE - MAX_COMMENT)
    tail = _read(fh, start, size - start)
    found: list[tuple[int, tuple[int, ...]]] = []
    seen = False
    pos = tail.rfind(EOCD)
    while pos != -1:  # at most one candidate per 4 bytes of the 64 KiB tail
        if pos + EOCD_SIZE <= len(tail):
            seen = True
            record = _EOCD.unpack_from(tail, pos)
            if pos + EOCD_SIZE + record[7] == len(tail):
                found.append((pos, record))
        pos = tail.rfind(EOCD, 0, pos)
    if len(found) > 1:
        raise _uninspectable("more than one end record reaches the end of the file (one inside the other's comment)")
    if found:
        pos, record = found[0]
        comment = tail[pos + EOCD_SIZE :]
        for sig in (EOCD, ZIP64_LOCATOR, ZIP64_EOCD):
            if sig in comment:
                raise _uninspectable("the ZIP comment holds another end-record signature")
        return start + pos, record
    if seen:
        raise _uninspectable("bytes follow the end record beyond the comment it declares")
    raise _corrupt("not a readable zip: no end of central directory record")


def _zip64_end(fh: IO[bytes], eocd_at: int) -> tuple[int, int, int, int] | None:
    """(ZIP64 record offset, entry count, directory size, directory offset), if a locator precedes the end record."""
    if eocd_at < _ZIP64_LOCATOR.size:
        return None
    locator_at = eocd_at - _ZIP64_LOCATOR.size
    sig, disk, record_at, disks = _ZIP64_LOCATOR.unpack(_read(fh, locator_at, _ZIP64_LOCATOR.size))
    if sig != ZIP64_LOCATOR:
        return None
    if disk != 0 or disks != 1:
        raise _corrupt("a spanned (multi-disk) archive")
    raw = _read(fh, record_at, _ZIP64_EOCD.size) if record_at < locator_at else b""
    if len(raw) < _ZIP64_EOCD.size or raw[:4] != ZIP64_EOCD:
        raise _uninspectable("the ZIP64 locator does not point at a ZIP64 end record")
    _, length, _, _, this_disk, cd_disk, here, total, cd_size, cd_offset = _ZIP64_EOCD.unpack(raw)
    if record_at + 12 + length != locator_at:
        raise _uninspectable("the ZIP64 end record does not end where its locator begins")
    if this_disk != 0 or cd_disk != 0 or here != total:
        raise _corrupt("a spanned (multi-disk) archive")
    return record_at, total, cd_size, cd_offset


def _zip64_values(extra: bytes, wanted: list[bool], what: str) -> list[int | None]:
    """The ZIP64 extra field's values for the fields marked wanted (in field order); None: keep the 32-bit value."""
    at = 0
    while at + 4 <= len(extra):
        tag, length = struct.unpack_from("<HH", extra, at)
        if tag == 0x0001:
            body = extra[at + 4 : at + 4 + length]
            values: list[int | None] = []
            pos = 0
            for want in wanted:
                if not want:
                    values.append(None)
                    continue
                if pos + 8 > len(body):
                    raise _uninspectable(f"{what}: its ZIP64 extra field is too short")
                values.append(struct.unpack_from("<Q", body, pos)[0])
                pos += 8
            return values
        at += 4 + length
    return [None] * len(wanted)  # no ZIP64 field: 0xFFFFFFFF is the value, as zipfile reads it


def _name(raw: bytes, flags: int) -> str:
    if flags & FLAG_UTF8:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise _corrupt(f"entry name {short_repr(raw)} is not valid UTF-8") from None
    return raw.decode("cp437")


def read_directory(fh: IO[bytes], size: int, max_entries: int) -> Directory:
    """Find the one end record and read the central directory it declares."""
    eocd_at, record = _find_end_record(fh, size)
    _, disk, cd_disk, here, total, cd_size, cd_offset, comment_length = record
    if disk != 0 or cd_disk != 0 or here != total:
        raise _corrupt("a spanned (multi-disk) archive")
    directory_end = eocd_at
    zip64 = _zip64_end(fh, eocd_at)
    if zip64 is not None:
        directory_end, total64, size64, offset64 = zip64
        for short, wide, sentinel in ((total, total64, U16), (cd_size, size64, U32), (cd_offset, offset64, U32)):
            if short not in (wide, sentinel):
                raise _uninspectable("the end record and the ZIP64 end record disagree")
        total, cd_size, cd_offset = total64, size64, offset64
    elif U32 in (cd_size, cd_offset) or total == U16 and cd_size == U32:
        raise _uninspectable("the end record says ZIP64 but no ZIP64 end record precedes it")
    if cd_offset + cd_size != directory_end:
        raise _uninspectable(
            f"the central directory ({cd_size} bytes at {cd_offset}) does not end where the end record begins"
            f" ({directory_end}): bytes before the first entry or between the directory and the end record"
        )
    if total > max_entries:
        raise Rejected("archive_limit", f"{total} entries > {max_entries}")
    entries: list[Entry] = []
    at = cd_offset
    for _ in range(total):
        raw = _read(fh, at, _CENTRAL.size)
        if len(raw) < _CENTRAL.size or raw[:4] != CENTRAL or at + _CENTRAL.size > directory_end:
            raise _uninspectable(f"central directory record {len(entries) + 1} of {total} is missing")
        fields = _CENTRAL.unpack(raw)
        (_, _, made_by, _, flags, method, _, _, crc, csize, usize, n, m, k, disk_start, _, attr, offset) = fields
        variable = _read(fh, at + _CENTRAL.size, n + m + k)
        at += _CENTRAL.size + n + m + k
        if len(variable) < n + m + k or at > directory_end:
            raise _uninspectable(f"central directory record {len(entries) + 1} runs past the directory")
        name = _name(variable[:n], flags)
        wanted = [usize == U32, csize == U32, offset == U32, disk_start == U16]
        if any(wanted):
            from64 = _zip64_values(variable[n : n + m], wanted, f"entry {short_repr(name)}")
            usize, csize, offset, disk_start = (
                short if value is None else value
                for value, short in zip(from64, (usize, csize, offset, disk_start), strict=True)
            )
        if disk_start != 0:
            raise _corrupt("a spanned (multi-disk) archive")
        entries.append(
            Entry(
                name=name,
                raw_name=variable[:n],
                method=method,
                flags=flags,
                crc=crc,
                compress_size=csize,
                file_size=usize,
                header_offset=offset,
                create_system=made_by,
                external_attr=attr,
            )
        )
    if at != directory_end:
        raise _uninspectable(
            f"the central directory holds {directory_end - at} bytes after its {total} declared records"
        )
    return Directory(entries=entries, cd_offset=cd_offset, comment_length=comment_length)


def _descriptor_end(fh: IO[bytes], entry: Entry, data_end: int, next_start: int) -> int:
    """Where the data descriptor after an entry's data ends; it must repeat the directory's CRC and sizes."""
    raw = _read(fh, data_end, 24)
    ends = []
    for signed in (True, False):
        if signed and raw[:4] != DESCRIPTOR:
            continue
        body = raw[4:] if signed else raw
        for fmt in ("<IQQ", "<III"):  # ZIP64 sizes, then 32-bit ones
            need = struct.calcsize(fmt)
            if len(body) >= need and struct.unpack_from(fmt, body) == (
                entry.crc,
                entry.compress_size,
                entry.file_size,
            ):
                ends.append(data_end + (4 if signed else 0) + need)
    if not ends:
        raise _uninspectable(
            f"entry {short_repr(entry.name)}: no data descriptor after its data repeats its directory record's"
            " CRC-32 and sizes"
        )
    return next_start if next_start in ends else ends[0]


def _agree(entry: Entry, local: tuple[int, int, int], deferred: bool) -> None:
    """The local header's CRC and sizes: the directory's, or (sizes after the data) each 0 or the directory's."""
    central = (entry.crc, entry.compress_size, entry.file_size)
    for field, mine, theirs in zip(("CRC-32", "compressed size", "size"), local, central, strict=True):
        if mine != theirs and not (deferred and mine == 0):
            raise _uninspectable(
                f"entry {short_repr(entry.name)}: its local header says {field} {mine},"
                f" its central directory record {theirs}"
            )


def check_entries(fh: IO[bytes], size: int, directory: Directory) -> list[Entry]:
    """Compare every local header with its record and check the entries tile the file up to the directory."""
    entries = directory.entries
    order = sorted(range(len(entries)), key=lambda i: entries[i].header_offset)
    starts = [entries[i].header_offset for i in order] + [directory.cd_offset]
    checked: list[Entry | None] = [None] * len(entries)
    covered, previous = 0, None  # the file is tiled up to `covered`, last by `previous`
    for k, i in enumerate(order):
        entry = entries[i]
        what = f"entry {short_repr(entry.name)}"
        if entry.header_offset < covered:
            raise Rejected("archive_limit", "entries overlap (non-recursive zip bomb)")
        if entry.header_offset > covered:
            where = "before the first entry" if previous is None else f"after entry {short_repr(previous.name)}"
            raise _uninspectable(
                f"{entry.header_offset - covered} bytes at offset {covered}, {where}, belong to no entry"
                " of the central directory (a local entry it does not list?)"
            )
        raw = _read(fh, entry.header_offset, _LOCAL.size)
        if len(raw) < _LOCAL.size or raw[:4] != LOCAL:
            raise _corrupt("central directory does not point at a local header")
        _, _, flags, method, _, _, crc, csize, usize, n, m = _LOCAL.unpack(raw)
        name_extra = _read(fh, entry.header_offset + _LOCAL.size, n + m)
        if len(name_extra) < n + m:
            raise _corrupt("entry data runs past the end of the archive")
        if method != entry.method:
            raise _uninspectable(
                f"{what}: its local header says compression method {method},"
                f" its central directory record {entry.method}"
            )
        if flags != entry.flags:
            raise _uninspectable(
                f"{what}: its local header says flags {flags:#06x}, its central directory record {entry.flags:#06x}"
            )
        if name_extra[:n] != entry.raw_name:
            raise _uninspectable(
                f"{what}: its local header names it {short_repr(name_extra[:n])}: the two readings differ"
            )
        if U32 in (csize, usize):
            wide = _zip64_values(name_extra[n:], [usize == U32, csize == U32], what)
            usize = usize if wide[0] is None else wide[0]
            csize = csize if wide[1] is None else wide[1]
        deferred = bool(flags & FLAG_DESCRIPTOR)
        _agree(entry, (crc, csize, usize), deferred)
        data_offset = entry.header_offset + _LOCAL.size + n + m
        data_end = data_offset + entry.compress_size
        if data_end > size:
            raise _corrupt("entry data runs past the end of the archive")
        covered = _descriptor_end(fh, entry, data_end, starts[k + 1]) if deferred else data_end
        checked[i] = replace(entry, data_offset=data_offset)
        previous = entry
    if covered > directory.cd_offset:
        raise _uninspectable("the last entry runs into the central directory")
    if covered < directory.cd_offset:
        where = "before the central directory" if previous is None else f"after entry {short_repr(previous.name)}"
        raise _uninspectable(
            f"{directory.cd_offset - covered} bytes at offset {covered}, {where}, belong to no entry"
            " of the central directory (a local entry it does not list?)"
        )
    return [e for e in checked if e is not None]
