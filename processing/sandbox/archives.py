"""ZIP inspector: central directory rules, local-header sanity, bounded recursion.

Nothing is extracted to disk. The rules (all -> rejected/archive_limit):
- more than zip_max_entries entries; declared total > zip_max_total_bytes (summed over
  every nesting level); declared total / archive size > zip_max_ratio;
- names that are absolute (/x, \\x, C:...), contain a '..' segment with either / or \\
  as separator, or contain NUL; duplicate names after normalisation;
- entries whose byte ranges overlap (zbsm-style non-recursive bombs); symlink entries
  whose target leaves the archive (targets that stay inside, COMPRESS-214, are fine);
- a nested zip (detected by magic, not name) deeper than zip_max_depth, or one whose
  decompression produces more bytes than it declared.
A central directory whose entries do not point at local headers is corrupt (a spanned
archive's last segment). Entries we cannot decompress (Deflate64, implode, encrypted)
are counted as uninspectable, not rejected: their declared sizes are still bounded.
A nested zip that does not parse is uninspectable too; only its limits propagate.
"""

from __future__ import annotations

import io
import itertools
import os
import posixpath
import re
import stat
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .limits import Bounds
from .outcome import Rejected, short_repr

ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
NESTED_MAX_BYTES = 256 << 20  # nested archives held in memory at once (RLIMIT_AS is 1 GiB)
LINK_MAX = 4096
_DRIVE = re.compile(r"^[A-Za-z]:")
_SEP = re.compile(r"[\\/]")


@dataclass
class _Stats:
    total_all: int = 0
    nested: int = 0
    max_depth: int = 0
    held: int = 0
    encrypted: int = 0
    symlinks: int = 0
    uninspectable: int = 0


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


def _read_bounded(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    # zipfile stops at the declared size, but we count what is produced anyway: the
    # declared size is attacker data and the bound must not depend on zipfile's honesty.
    buf = bytearray()
    with zf.open(info) as member:
        while chunk := member.read(1 << 20):
            buf += chunk
            if len(buf) > info.file_size:
                raise _limit("nested archive inflates past its declared size")
    return bytes(buf)


def _nested(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, depth: int, bounds: Bounds, st: _Stats
) -> None:
    try:
        with zf.open(info) as member:
            head = member.read(4)
    except Exception:  # noqa: BLE001 - NotImplementedError (Deflate64, implode), CRC, zlib
        st.uninspectable += 1
        return
    if head not in ZIP_MAGICS:
        return
    if depth + 1 > bounds.zip_max_depth:
        raise _limit(f"archives nested deeper than {bounds.zip_max_depth}")
    if st.held + info.file_size > NESTED_MAX_BYTES:
        raise _limit("nested archives too large to inspect")
    st.held += info.file_size
    try:
        try:
            blob = _read_bounded(zf, info)
        except Rejected:
            raise
        except Exception:  # noqa: BLE001 - cannot decompress it: nobody can expand it either
            st.uninspectable += 1
            return
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
        st.held -= info.file_size


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
        for info in infos:
            if info.flag_bits & 0x1:
                st.encrypted += 1  # listed within bounds; content cannot be read here
                continue
            if info.create_system == 3 and stat.S_ISLNK(info.external_attr >> 16):
                st.symlinks += 1
                _check_symlink(zf, info)
                continue
            if not info.is_dir() and info.file_size >= 22:  # 22 = smallest possible zip
                _nested(zf, info, depth, bounds, st)
    return len(infos), total


def process(
    input_path: Path, work_dir: Path, bounds: Bounds
) -> tuple[dict[str, Any], dict[str, str]]:
    """Inspect one zip (central directory and nested zips); return (data, files)."""
    st = _Stats()
    size = os.path.getsize(input_path)
    with open(input_path, "rb") as fh:
        entries, total = _inspect(fh, size, 0, bounds, st)
    data = {
        "entries": entries,
        "total_bytes": total,
        "nested_archives": st.nested,
        "max_depth": st.max_depth,
        "encrypted_entries": st.encrypted,
        "symlinks": st.symlinks,
        "uninspectable_entries": st.uninspectable,
    }
    return data, {}
