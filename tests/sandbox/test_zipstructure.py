"""One reading of a ZIP: each rule of zipstructure/zipinflate on hand-built bytes, and
ordinary ZIPs written by Python's zipfile (stored, deflated, bzip2, LZMA, data
descriptors, a comment, ZIP64) still pass. In process: these are parsers, not decoders."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from pathlib import Path

import pytest

from processing.sandbox import Bounds
from processing.sandbox.archives import process
from processing.sandbox.outcome import Rejected
from tests.corpus.make_generated import EICAR, README, hand_zip, member

DESCRIPTOR = 0x08


def verdict(data: bytes, tmp_path: Path, bounds: Bounds | None = None) -> str:
    """ready, or rejected:<code>: <message>."""
    path = tmp_path / "in.zip"
    path.write_bytes(data)
    try:
        process(path, tmp_path, bounds or Bounds())
    except Rejected as exc:
        return f"rejected:{exc.reason_code}: {exc.message}"
    return "ready"


def uninspectable(data: bytes, tmp_path: Path, words: str) -> None:
    result = verdict(data, tmp_path)
    assert result.startswith("rejected:archive_uninspectable: "), result
    assert words in result, result


def two() -> list[dict]:
    return [member("README.txt", README), member("b.txt", b"second member " * 10)]


def test_a_hand_built_zip_passes(tmp_path: Path) -> None:
    assert verdict(hand_zip(two()), tmp_path) == "ready"
    assert (
        verdict(hand_zip([member("s.txt", README, method=0), member("d.txt", README, method=9)]), tmp_path) == "ready"
    )


# Rule 1: the local header agrees with its directory record.


@pytest.mark.parametrize(
    ("local", "words"),
    [
        ({"method": 0}, "local header says compression method 0, its central directory record 8"),
        ({"flags": 0x800}, "local header says flags 0x0800, its central directory record 0x0000"),
        ({"name": b"README.TXT"}, "local header names it b'README.TXT'"),
        ({"crc": 1}, "local header says CRC-32 1"),
        ({"csize": 3}, "local header says compressed size 3"),
        ({"size": 3}, "local header says size 3"),
    ],
)
def test_the_local_header_must_agree_with_the_directory(tmp_path: Path, local: dict, words: str) -> None:
    members = two()
    members[0]["local"] = local
    uninspectable(hand_zip(members), tmp_path, words)


def test_stored_in_the_directory_over_deflate_in_the_local_header(tmp_path: Path) -> None:
    m = member("tools/eicar.com", EICAR)
    raw = {"method": 0, "crc": zlib.crc32(m["data"]), "size": m["csize"]}
    uninspectable(hand_zip([m | {"central": raw}]), tmp_path, "compression method 8, its central directory record 0")


def _deferred(m: dict, descriptor: bytes, local: dict | None = None) -> dict:
    """The member with flag bit 3, its header's CRC and sizes zeroed, `descriptor` after its data."""
    zeros = {"crc": 0, "csize": 0, "size": 0} if local is None else local
    return m | {"flags": DESCRIPTOR, "local": zeros, "descriptor": descriptor}


def test_data_descriptors_with_and_without_signature_pass(tmp_path: Path) -> None:
    m = member("README.txt", README)
    values = struct.pack("<III", m["crc"], m["csize"], m["size"])
    for descriptor in (b"PK\x07\x08" + values, values):
        assert verdict(hand_zip([_deferred(m, descriptor), member("b.txt", b"x")]), tmp_path) == "ready"
    # bit 3 with the real values in the header too (some writers do): fine
    same = {"crc": m["crc"], "csize": m["csize"], "size": m["size"]}
    assert verdict(hand_zip([_deferred(m, b"PK\x07\x08" + values, same)]), tmp_path) == "ready"


def test_with_bit_3_the_descriptor_must_agree(tmp_path: Path) -> None:
    m = member("README.txt", README)
    wrong = b"PK\x07\x08" + struct.pack("<III", m["crc"], m["csize"] + 1, m["size"])
    uninspectable(hand_zip([_deferred(m, wrong)]), tmp_path, "no data descriptor after its data repeats")
    uninspectable(hand_zip([_deferred(m, b"")]), tmp_path, "no data descriptor after its data repeats")
    # the header's values may be 0, not different ones
    right = b"PK\x07\x08" + struct.pack("<III", m["crc"], m["csize"], m["size"])
    lie = {"crc": 0, "csize": 0, "size": 68}
    uninspectable(hand_zip([_deferred(m, right, lie)]), tmp_path, "local header says size 68")


# Rule 2: the entries tile the file from 0 to the directory; one end record at the end.


def test_a_local_entry_the_directory_does_not_list(tmp_path: Path) -> None:
    members = [member("README.txt", README), member("tools/eicar.com", EICAR), member("c.txt", b"c")]
    for listed in ([0, 2], [0, 1], [1, 2]):
        uninspectable(hand_zip(members, listed=listed), tmp_path, "belong to no entry of the central directory")
    result = verdict(hand_zip(members, listed=[1, 2]), tmp_path)
    assert "at offset 0, before the first entry" in result, result


def test_bytes_before_the_first_entry(tmp_path: Path) -> None:
    data = hand_zip(two())
    # as zipfile and Info-ZIP read it (they shift every offset past the prepended bytes)
    uninspectable(b"MZ" + bytes(30) + data, tmp_path, "does not end where the end record begins")
    assert zipfile.ZipFile(io.BytesIO(b"MZ" + bytes(30) + data)).read("README.txt") == README
    # with every offset fixed up to match, the prepended bytes are a gap
    cd = data.index(b"PK\x01\x02")
    shifted = bytearray(b"\0" * 32 + data)
    for at in (i for i in range(len(shifted)) if shifted[i : i + 4] == b"PK\x01\x02"):
        offset = struct.unpack_from("<I", shifted, at + 42)[0]
        struct.pack_into("<I", shifted, at + 42, offset + 32)
    eocd = shifted.rindex(b"PK\x05\x06")
    struct.pack_into("<I", shifted, eocd + 16, cd + 32)
    uninspectable(bytes(shifted), tmp_path, "32 bytes at offset 0, before the first entry")


def test_overlapping_entries_are_a_bomb(tmp_path: Path) -> None:
    data = bytearray(hand_zip(two()))
    second = data.index(b"PK\x01\x02", data.index(b"PK\x01\x02") + 4)
    struct.pack_into("<I", data, second + 42, 0)  # the second record points at the first entry
    assert verdict(bytes(data), tmp_path) == "rejected:archive_limit: entries overlap (non-recursive zip bomb)"


def test_one_end_record_at_the_end_and_only_the_declared_comment_after_it(tmp_path: Path) -> None:
    data = hand_zip(two())
    uninspectable(data + b"junk", tmp_path, "bytes follow the end record beyond the comment it declares")
    uninspectable(data + data[-22:], tmp_path, "does not end where the end record begins")  # a second end record
    assert verdict(hand_zip(two(), comment=b"made by hand"), tmp_path) == "ready"
    hidden = hand_zip(two(), comment=b"x" + data[-22:])  # an end record inside the comment
    uninspectable(hidden, tmp_path, "more than one end record reaches the end of the file")
    signature = hand_zip(two(), comment=b"see PK\x05\x06 for more")  # a signature a backward search could take
    uninspectable(signature, tmp_path, "the ZIP comment holds another end-record signature")


def test_a_zip_followed_by_another(tmp_path: Path) -> None:
    first = hand_zip([member("tools/eicar.com", EICAR)])
    uninspectable(first + hand_zip(two()), tmp_path, "does not end where the end record begins")


def test_the_directory_holds_exactly_the_declared_records(tmp_path: Path) -> None:
    data = bytearray(hand_zip(two()))
    eocd = len(data) - 22
    for count, words in ((1, "bytes after its 1 declared records"), (3, "record 3 of 3 is missing")):
        struct.pack_into("<HH", data, eocd + 8, count, count)
        uninspectable(bytes(data), tmp_path, words)


def test_not_a_zip_truncated_and_spanned_are_corrupt(tmp_path: Path) -> None:
    data = hand_zip(two())
    assert verdict(b"not a zip" * 10, tmp_path).startswith("rejected:corrupt")
    assert verdict(data[: len(data) // 2], tmp_path).startswith("rejected:corrupt")
    spanned = bytearray(data)
    struct.pack_into("<H", spanned, len(data) - 22 + 4, 1)  # this is disk 1
    assert verdict(bytes(spanned), tmp_path) == "rejected:corrupt: a spanned (multi-disk) archive"


# ZIP64 end records


def _as_zip64(data: bytes, *, sentinels: bool = True, locator_to: int | None = None) -> bytes:
    """The same entries with a ZIP64 end record and locator before the end record."""
    eocd = len(data) - 22
    _, _, _, _, count, cd_size, cd_offset, _ = struct.unpack("<4sHHHHIIH", data[eocd:])
    record = struct.pack("<4sQHHIIQQQQ", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, cd_size, cd_offset)
    locator = struct.pack("<4sIQI", b"PK\x06\x07", 0, eocd if locator_to is None else locator_to, 1)
    if sentinels:
        end = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    else:
        end = data[eocd:]
    return data[:eocd] + record + locator + end


def test_zip64_end_records(tmp_path: Path) -> None:
    data = hand_zip(two())
    assert verdict(_as_zip64(data), tmp_path) == "ready"
    assert verdict(_as_zip64(data, sentinels=False), tmp_path) == "ready"
    uninspectable(_as_zip64(data, locator_to=0), tmp_path, "does not point at a ZIP64 end record")
    eocd = len(data) - 22
    sentinel = data[:eocd] + struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 2, 2, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    uninspectable(sentinel, tmp_path, "says ZIP64 but no ZIP64 end record")
    wrong = bytearray(_as_zip64(data, sentinels=False))
    struct.pack_into("<I", wrong, len(wrong) - 6, 1)  # the 32-bit directory offset now disagrees
    uninspectable(bytes(wrong), tmp_path, "the end record and the ZIP64 end record disagree")


# Streams end exactly at the compressed size.


def test_bytes_hidden_after_a_stream_that_ends_early(tmp_path: Path) -> None:
    # Java's ZipInputStream with a data descriptor reads the descriptor right after the
    # stream: the hidden bytes would be its next entry.
    for method in (8, 9):
        m = member("README.txt", README, method=method)
        hidden = b"PK\x03\x04" + bytes(26) + EICAR
        m = m | {"data": m["data"] + hidden, "csize": m["csize"] + len(hidden)}
        uninspectable(hand_zip([m]), tmp_path, "its compressed stream ends before its compressed size")


def test_a_stream_that_does_not_end_is_corrupt(tmp_path: Path) -> None:
    for method in (8, 9):
        m = member("README.txt", README, method=method)
        cut = m | {"data": m["data"][:-1], "csize": m["csize"] - 1}
        assert verdict(hand_zip([cut]), tmp_path).startswith("rejected:corrupt"), method


# Deflate64 members are bounded like any other.


def test_deflate64_members_are_bounded_like_any_other(tmp_path: Path) -> None:
    bomb = hand_zip([member("zeros", bytes(10 << 20), method=9)])
    assert verdict(bomb, tmp_path).startswith("rejected:archive_limit: expansion ratio")
    m = member("zeros", bytes(4 << 20), method=9)
    lie = hand_zip([m | {"size": 1000}])
    assert (
        verdict(lie, tmp_path) == "rejected:archive_limit: entry 'zeros' inflates past its declared size of 1000 bytes"
    )
    many = hand_zip([member(f"f{i}", b"x", method=9) for i in range(11)])
    assert verdict(many, tmp_path, Bounds(zip_max_entries=10)).startswith("rejected:archive_limit: 11 entries > 10")
    wide = hand_zip([member("a", README * 50, method=9)])
    assert verdict(wide, tmp_path, Bounds(zip_max_total_bytes=45_000)) == "ready"
    assert "declared expanded size" in verdict(wide, tmp_path, Bounds(zip_max_total_bytes=44_999))


# Ordinary ZIPs written by Python's zipfile still pass.


class _Unseekable(io.RawIOBase):
    """A pipe-like sink: zipfile then writes data descriptors (flag bit 3)."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:  # type: ignore[no-untyped-def, override]
        self.buf += b
        return len(b)


ENTRIES = [("docs/", b""), ("docs/a.txt", README), ("b.bin", bytes(range(256)) * 8), ("empty.txt", b"")]


def _written(method: int, *, stream: bool = False, comment: bytes = b"", zip64: bool = False) -> bytes:
    sink: io.BytesIO | _Unseekable = _Unseekable() if stream else io.BytesIO()
    with zipfile.ZipFile(sink, "w", method) as zf:  # type: ignore[arg-type]
        zf.comment = comment
        for name, data in ENTRIES:
            if name.endswith("/"):
                zf.writestr(name, data)
                continue
            with zf.open(name, "w", force_zip64=zip64) as fh:
                fh.write(data)
    return bytes(sink.buf) if isinstance(sink, _Unseekable) else sink.getvalue()


@pytest.mark.parametrize("method", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
@pytest.mark.parametrize(
    "how", [{}, {"stream": True}, {"comment": b"a comment"}, {"zip64": True}, {"stream": True, "zip64": True}]
)
def test_ordinary_zips_pass(tmp_path: Path, method: int, how: dict) -> None:
    data = _written(method, **how)
    if how.get("stream"):
        assert zipfile.ZipFile(io.BytesIO(data)).infolist()[1].flag_bits & DESCRIPTOR  # descriptors really used
    assert verdict(data, tmp_path) == "ready"


def test_a_zip64_directory_of_65536_entries_passes(tmp_path: Path) -> None:
    # zipfile writes a ZIP64 end record only past 65,535 entries (or 4 GiB).
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for i in range(65_536):
            zf.writestr(f"{i}", b"")
    data = buf.getvalue()
    assert b"PK\x06\x06" in data[-200:]
    assert verdict(data, tmp_path, Bounds(zip_max_entries=70_000)) == "ready"
    assert verdict(data, tmp_path).startswith("rejected:archive_limit: 65536 entries > 1000")
