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
A central directory whose entries do not point at local headers is corrupt (a spanned
archive's last segment), and so is an entry that does not inflate (bad CRC, broken
stream, shorter than declared). An entry we cannot decompress (Deflate64, implode,
encrypted, any method zipfile lacks) is rejected/archive_uninspectable: its declared size
could hide a bomb and its content a payload no scan saw. With zip_allow_uninspectable it
is counted instead and passes unscanned, its declared size still bounded. bzip2/LZMA entries are inflated through
zipfile,
which does not bound one call's output: RLIMIT_AS does (a MemoryError is corrupt).
A nested zip that does not parse is uninspectable too; only its limits propagate.
"""

from __future__ import annotations

import copy
import io
import itertools
import os
import posixpath
import re
import stat
import struct
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from .limits import Bounds
from .outcome import Rejected, Source, short_repr

ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
NESTED_MAX_BYTES = 256 << 20  # nested archives held in memory at once (RLIMIT_AS is 1 GiB)
LINK_MAX = 4096
# The top-level names and sizes kept for the console's listing (the first this many, in directory order).
LISTING_MAX = 200
LISTING_NAME_CHARS = 255  # a ZIP name may be 64 KiB: the listing keeps the start of it
MemberScan = Callable[[bytes], "str | None"]  # inflated entry -> matching rule, or None
CHUNK = 1 << 20  # output per read: deflate is bounded per call by zipfile's max_length
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


def _check_layout(fh: IO[bytes], size: int, infos: list[zipfile.ZipInfo]) -> None:
    """Every entry must start with a local header, end inside the file, and not overlap."""
    spans = []
    for info in infos:
        fh.seek(info.header_offset)
        header = fh.read(30)
        if len(header) < 30 or header[:4] != b"PK\x03\x04":
            raise Rejected("corrupt", "central directory does not point at a local header")
        name_len, extra_len = struct.unpack("<HH", header[26:30])
        end = info.header_offset + 30 + name_len + extra_len + info.compress_size
        if end > size:
            raise Rejected("corrupt", "entry data runs past the end of the archive")
        spans.append((info.header_offset, end))
    spans.sort()
    for (_, prev_end), (start, _) in itertools.pairwise(spans):
        if start < prev_end:
            raise _limit("entries overlap (non-recursive zip bomb)")


def _check_symlink(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> None:
    if info.file_size > LINK_MAX:
        raise _limit("symlink target too long")
    try:
        target = zf.read(info)[:LINK_MAX].decode("utf-8", "replace")
    except Exception:  # noqa: BLE001 - encrypted, unsupported method, bad CRC: all unreadable
        raise _limit("symlink target cannot be read") from None
    if target.startswith(("/", "\\")) or _DRIVE.match(target):
        raise _limit(f"symlink to an absolute path: {short_repr(target)}")
    base = posixpath.dirname(_normalise(info.filename))
    resolved = posixpath.normpath(posixpath.join(base, target.replace("\\", "/")))
    if resolved == ".." or resolved.startswith(("../", "/")):
        raise _limit(f"symlink leaves the archive: {short_repr(target)}")


def _uninspectable(info: zipfile.ZipInfo, why: str, bounds: Bounds, st: _Stats) -> None:
    if not bounds.zip_allow_uninspectable:
        raise Rejected(
            "archive_uninspectable",
            f"entry {short_repr(info.filename)} {why}: its content cannot be inflated or scanned",
        )
    st.uninspectable += 1


def _inflate(zf: zipfile.ZipFile, info: zipfile.ZipInfo, st: _Stats, scan: MemberScan | None) -> bytes | None:
    """Inflate one entry, counting the bytes it really produces; keep them only if nested.

    zipfile stops at the declared size: it is handed a copy that allows one byte more,
    so a lie shows up as that byte, and no CRC (zipfile would check it on the truncated
    output and call the lie a bad CRC); the CRC is checked here, over what was produced.
    Returns the bytes when they start a zip, None otherwise, or raises (Rejected;
    anything else = cannot be inflated).
    """
    capped = copy.copy(info)
    capped.file_size = info.file_size + 1
    del capped.CRC
    produced, crc = 0, 0
    keep: bytearray | bool | None = None
    with zf.open(capped) as member:
        while chunk := member.read(CHUNK):
            produced += len(chunk)
            crc = zlib.crc32(chunk, crc)
            if produced > info.file_size:
                raise _limit(
                    f"entry {short_repr(info.filename)} inflates past its declared size of {info.file_size} bytes"
                )
            if keep is None:
                keep = bytearray() if scan is not None or chunk[:4] in ZIP_MAGICS else False
                if keep is not False and st.held + info.file_size > NESTED_MAX_BYTES:
                    raise _limit(
                        f"entry {short_repr(info.filename)} too large to inspect in memory"
                        f" ({info.file_size} bytes; {NESTED_MAX_BYTES} held at most)"
                    )
            if isinstance(keep, bytearray):
                keep += chunk
    if produced < info.file_size:
        raise Rejected("corrupt", f"entry {short_repr(info.filename)} is shorter than declared")
    if crc != info.CRC:
        raise Rejected("corrupt", f"entry {short_repr(info.filename)} fails its CRC-32")
    st.produced += produced
    data = bytes(keep) if keep else b""  # yara-x takes bytes only: one copy, shared below
    del keep
    if scan is not None:
        # What a client extracting the archive gets, entry by entry, within the same
        # bounds: the outer scan only ever saw these bytes compressed.
        st.scanned += 1
        match = scan(data)
        if match:
            raise Rejected("malware", f"{match} in entry {short_repr(info.filename)}")
    return data if data[:4] in ZIP_MAGICS else None


def _entry(zf: zipfile.ZipFile, info: zipfile.ZipInfo, depth: int, bounds: Bounds, st: _Stats) -> None:
    try:
        blob = _inflate(zf, info, st, st.scan)
    except NotImplementedError:  # Deflate64, implode, PPMd...: zipfile has no decompressor
        _uninspectable(info, f"uses compression method {info.compress_type}", bounds, st)
        return
    except Rejected:
        raise
    except Exception as exc:  # noqa: BLE001 - bad CRC, broken deflate stream, truncated data
        raise Rejected("corrupt", f"entry {short_repr(info.filename)} does not inflate: {type(exc).__name__}") from None
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
        except (zipfile.BadZipFile, ValueError, OSError, EOFError, struct.error):
            st.uninspectable += 1
    finally:
        st.held -= len(blob)


def _inspect(fh: IO[bytes], size: int, depth: int, bounds: Bounds, st: _Stats) -> tuple[int, int]:
    try:
        zf = zipfile.ZipFile(fh)
    except (
        zipfile.BadZipFile,
        ValueError,
        OSError,
        EOFError,
        struct.error,
        NotImplementedError,
    ) as exc:
        raise Rejected("corrupt", f"not a readable zip: {type(exc).__name__}") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > bounds.zip_max_entries:
            raise _limit(f"{len(infos)} entries > {bounds.zip_max_entries}")
        seen: set[str] = set()
        for info in infos:
            _check_name(info.orig_filename)
            key = _normalise(info.filename)
            if key in seen:
                raise _limit(f"duplicate entry name: {short_repr(info.filename)}")
            seen.add(key)
        total = sum(info.file_size for info in infos)
        st.total_all += total
        if st.total_all > bounds.zip_max_total_bytes:
            raise _limit(f"declared expanded size {st.total_all} > {bounds.zip_max_total_bytes}")
        if total / max(size, 1) > bounds.zip_max_ratio:
            raise _limit(f"expansion ratio {total / max(size, 1):.1f} > {bounds.zip_max_ratio:g}")
        _check_layout(fh, size, infos)
        if depth == 0:  # what a person unpacking it sees first; the checks below still cover every entry
            st.listing = [[info.filename[:LISTING_NAME_CHARS], info.file_size] for info in infos[:LISTING_MAX]]
        for info in infos:
            if info.flag_bits & 0x1:  # ZipCrypto or WinZip AES: no password here
                st.encrypted += 1
                _uninspectable(info, "is encrypted", bounds, st)
                continue
            if info.create_system == 3 and stat.S_ISLNK(info.external_attr >> 16):
                st.symlinks += 1
                _check_symlink(zf, info)
                continue
            _entry(zf, info, depth, bounds, st)
    return len(infos), total


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
