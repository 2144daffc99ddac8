"""ZIP inspector: central directory rules, local-header sanity, every entry inflated.

Nothing is extracted to disk, but every readable entry is inflated in memory-bounded
chunks and its real size counted: a central directory is attacker data, so the
declared sizes the bounds below are checked on only hold because no entry may produce
more than it declares (an entry that does is rejected/archive_limit at the first byte
past its claim; one that produces fewer is corrupt). The rules (all -> rejected/archive_limit):
- more than zip_max_entries entries; declared total > zip_max_total_bytes (summed over
  every nesting level); declared total / archive size > zip_max_ratio;
- names that are absolute (/x, \\x, C:...), contain a '..' segment with either / or \\
  as separator, or contain NUL; duplicate names after normalisation;
- entries whose byte ranges overlap (zbsm-style non-recursive bombs); symlink entries
  whose target leaves the archive (targets that stay inside, COMPRESS-214, are fine);
- any entry whose decompression produces more bytes than it declared;
- with a member scan (YARA rules, compiled once by the fork server), every inflated entry
  at every level is scanned as a client would extract it: a match is rejected/malware;
  an entry too large to hold for the scan is archive_limit;
- a nested zip (detected by magic, not name) deeper than zip_max_depth.
Before any of that the file is read once, as every extractor would read it
(zipstructure.py): one end record, local headers that agree with the directory, entries
that tile the file; otherwise rejected/archive_uninspectable (overlaps: archive_limit;
no zip, truncated, spanned, a directory pointing at no local header: corrupt). An entry
that does not inflate (bad CRC, broken stream, shorter than declared) is corrupt; one
whose stream ends before its compressed size is archive_uninspectable (zipinflate.py).
Stored, deflate, Deflate64, bzip2 and LZMA entries are inflated; an entry we cannot
decompress (implode, PPMd, any other method, encrypted) is rejected/archive_uninspectable:
its declared size could hide a bomb and its content a payload no scan saw. With
zip_allow_uninspectable it is counted instead and passes unscanned, its declared size
still bounded. A nested zip that does not parse (corrupt) only counts; any other
rejection one level down is the archive's.
"""

from __future__ import annotations

import io
import os
import posixpath
import re
import stat
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from . import zipinflate, zipstructure
from .limits import Bounds
from .outcome import Rejected, Source, short_repr
from .zipstructure import Entry

ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
NESTED_MAX_BYTES = 256 << 20  # nested archives held in memory at once (RLIMIT_AS is 1 GiB)
LINK_MAX = 4096
# The top-level names and sizes kept for the console's listing (the first this many, in directory order).
LISTING_MAX = 200
LISTING_NAME_CHARS = 255  # a ZIP name may be 64 KiB: the listing keeps the start of it
MemberScan = Callable[[bytes], "str | None"]  # inflated entry -> matching rule, or None
_DRIVE = re.compile(r"^[A-Za-z]:")
_SEP = re.compile(r"[\\/]")


@dataclass
class _Stats:
    total_all: int = 0
    nested: int = 0
    max_depth: int = 0
    held: int = 0
    produced: int = 0  # bytes the readable entries really inflated to, every level
    scanned: int = 0  # entries whose inflated bytes the member scan saw
    scan: MemberScan | None = None
    encrypted: int = 0
    symlinks: int = 0
    uninspectable: int = 0
    listing: list[list[Any]] = field(default_factory=list)  # [name, declared size] of top-level entries


def _limit(message: str) -> Rejected:
    return Rejected("archive_limit", message)


def _check_name(name: str) -> None:
    if "\x00" in name:
        raise _limit(f"entry name contains NUL: {short_repr(name)}")
    if name.startswith(("/", "\\")) or _DRIVE.match(name):
        raise _limit(f"absolute entry name: {short_repr(name)}")
    if ".." in _SEP.split(name):
        raise _limit(f"entry name escapes with '..': {short_repr(name)}")


def _normalise(name: str) -> str:
    return posixpath.normpath(name.replace("\\", "/")).rstrip("/")


def _read_link(fh: IO[bytes], entry: Entry) -> bytes:
    target = b""
    for chunk in zipinflate.chunks(fh, entry):
        target += chunk
        if len(target) > LINK_MAX:
            break
    return target[:LINK_MAX]


def _check_symlink(fh: IO[bytes], entry: Entry) -> None:
    if entry.file_size > LINK_MAX:
        raise _limit("symlink target too long")
    try:
        target = _read_link(fh, entry).decode("utf-8", "replace")
    except Exception:  # noqa: BLE001 - encrypted, unsupported method, broken stream: all unreadable
        raise _limit("symlink target cannot be read") from None
    if target.startswith(("/", "\\")) or _DRIVE.match(target):
        raise _limit(f"symlink to an absolute path: {short_repr(target)}")
    base = posixpath.dirname(_normalise(entry.name))
    resolved = posixpath.normpath(posixpath.join(base, target.replace("\\", "/")))
    if resolved == ".." or resolved.startswith(("../", "/")):
        raise _limit(f"symlink leaves the archive: {short_repr(target)}")


def _uninspectable(entry: Entry, why: str, bounds: Bounds, st: _Stats) -> None:
    if not bounds.zip_allow_uninspectable:
        raise Rejected(
            "archive_uninspectable",
            f"entry {short_repr(entry.name)} {why}: its content cannot be inflated or scanned",
        )
    st.uninspectable += 1


def _inflate(fh: IO[bytes], entry: Entry, st: _Stats, scan: MemberScan | None) -> bytes | None:
    """Inflate one entry, counting the bytes it really produces; keep them only if nested.

    A lie about the size shows up as the first byte past the claim; the CRC is checked
    over what was produced. Returns the bytes when they start a zip, None otherwise, or
    raises (Rejected; NotImplementedError for a method we lack; anything else = cannot
    be inflated).
    """
    produced, crc = 0, 0
    keep: bytearray | bool | None = None
    for chunk in zipinflate.chunks(fh, entry):
        if not chunk:
            continue
        produced += len(chunk)
        crc = zlib.crc32(chunk, crc)
        if produced > entry.file_size:
            raise _limit(f"entry {short_repr(entry.name)} inflates past its declared size of {entry.file_size} bytes")
        if keep is None:
            keep = bytearray() if scan is not None or chunk[:4] in ZIP_MAGICS else False
            if keep is not False and st.held + entry.file_size > NESTED_MAX_BYTES:
                raise _limit(
                    f"entry {short_repr(entry.name)} too large to inspect in memory"
                    f" ({entry.file_size} bytes; {NESTED_MAX_BYTES} held at most)"
                )
        if isinstance(keep, bytearray):
            keep += chunk
    if produced < entry.file_size:
        raise Rejected("corrupt", f"entry {short_repr(entry.name)} is shorter than declared")
    if crc != entry.crc:
        raise Rejected("corrupt", f"entry {short_repr(entry.name)} fails its CRC-32")
    st.produced += produced
    data = bytes(keep) if keep else b""  # yara-x takes bytes only: one copy, shared below
    del keep
    if scan is not None:
        # What a client extracting the archive gets, entry by entry, within the same
        # bounds: the outer scan only ever saw these bytes compressed.
        st.scanned += 1
        match = scan(data)
        if match:
            raise Rejected("malware", f"{match} in entry {short_repr(entry.name)}")
    return data if data[:4] in ZIP_MAGICS else None


def _entry(fh: IO[bytes], entry: Entry, depth: int, bounds: Bounds, st: _Stats) -> None:
    try:
        blob = _inflate(fh, entry, st, st.scan)
    except NotImplementedError:  # implode, PPMd, ...: no decompressor here
        _uninspectable(entry, f"uses compression method {entry.method}", bounds, st)
        return
    except Rejected:
        raise
    except Exception as exc:  # noqa: BLE001 - broken stream, truncated data
        raise Rejected("corrupt", f"entry {short_repr(entry.name)} does not inflate: {type(exc).__name__}") from None
    if blob is None:
        return
    if depth + 1 > bounds.zip_max_depth:
        raise _limit(f"archives nested deeper than {bounds.zip_max_depth}")
    st.held += len(blob)
    try:
        st.nested += 1
        st.max_depth = max(st.max_depth, depth + 1)
        try:
            _inspect(io.BytesIO(blob), len(blob), depth + 1, bounds, st)
        except Rejected as exc:
            if exc.reason_code != "corrupt":
                raise
            st.uninspectable += 1  # a broken inner zip cannot expand: only limits matter
        except (ValueError, OSError, EOFError, struct.error):
            st.uninspectable += 1
    finally:
        st.held -= len(blob)


def _inspect(fh: IO[bytes], size: int, depth: int, bounds: Bounds, st: _Stats) -> tuple[int, int]:
    directory = zipstructure.read_directory(fh, size, bounds.zip_max_entries)
    entries = directory.entries
    seen: set[str] = set()
    for entry in entries:
        _check_name(entry.name)
        key = _normalise(entry.name)
        if key in seen:
            raise _limit(f"duplicate entry name: {short_repr(entry.name)}")
        seen.add(key)
    total = sum(entry.file_size for entry in entries)
    st.total_all += total
    if st.total_all > bounds.zip_max_total_bytes:
        raise _limit(f"declared expanded size {st.total_all} > {bounds.zip_max_total_bytes}")
    if total / max(size, 1) > bounds.zip_max_ratio:
        raise _limit(f"expansion ratio {total / max(size, 1):.1f} > {bounds.zip_max_ratio:g}")
    entries = zipstructure.check_entries(fh, size, directory)
    if depth == 0:  # what a person unpacking it sees first; the checks below still cover every entry
        st.listing = [[entry.name[:LISTING_NAME_CHARS], entry.file_size] for entry in entries[:LISTING_MAX]]
    for entry in entries:
        if entry.encrypted:  # ZipCrypto or WinZip AES: no password here
            st.encrypted += 1
            _uninspectable(entry, "is encrypted", bounds, st)
            continue
        if entry.create_system == 3 and stat.S_ISLNK(entry.external_attr >> 16):
            st.symlinks += 1
            _check_symlink(fh, entry)
            continue
        _entry(fh, entry, depth, bounds, st)
    return len(entries), total


def process(
    src: Source, work_dir: Path, bounds: Bounds, scan: MemberScan | None = None
) -> tuple[dict[str, Any], dict[str, str]]:
    """Inspect one zip (central directory and nested zips); return (data, files)."""
    st = _Stats(scan=scan)
    if isinstance(src, (str, Path)):
        with open(src, "rb") as fh:
            entries, total = _inspect(fh, os.fstat(fh.fileno()).st_size, 0, bounds, st)
    else:
        entries, total = _inspect(src, os.fstat(src.fileno()).st_size, 0, bounds, st)
    data = {
        "entries": entries,
        "total_bytes": total,
        "inflated_bytes": st.produced,
        "nested_archives": st.nested,
        "max_depth": st.max_depth,
        "encrypted_entries": st.encrypted,
        "symlinks": st.symlinks,
        "uninspectable_entries": st.uninspectable,
        "scanned_entries": st.scanned,
        "listing": st.listing,
    }
    return data, {}
