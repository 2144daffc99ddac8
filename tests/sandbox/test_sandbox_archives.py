"""Generated ZIP fixtures: bombs, entry counts, hostile names, duplicates, nesting, symlinks."""

from __future__ import annotations

import io
import stat
import warnings
import zipfile
from pathlib import Path

import pytest

from processing.sandbox import Bounds
from tests.sandbox.helpers import outcome, zip_patched


def make_zip(entries: list[tuple[str | zipfile.ZipInfo, bytes]], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about duplicate names: we want them
        with zipfile.ZipFile(buf, "w", method) as zf:
            for name, data in entries:
                zf.writestr(name, data)
    return buf.getvalue()


def nested(depth: int) -> bytes:
    """A zip holding a zip ... `depth` levels below the outer one (entry names hide the type)."""
    data = make_zip([("leaf.txt", b"hello")])
    for _ in range(depth):
        data = make_zip([("payload.bin", data), ("readme.txt", b"x")])
    return data


def test_ratio_bomb(run) -> None:
    data = make_zip([("zeros.txt", b"\0" * (10 << 20))])
    result = run("zip", data)
    assert outcome(result) == "rejected:archive_limit" and "ratio" in result.message


def test_total_bound(run) -> None:
    data = make_zip([("a.bin", bytes(range(256)) * 40)], method=zipfile.ZIP_STORED)
    assert outcome(run("zip", data, bounds=Bounds(zip_max_total_bytes=10_240))) == "ready"
    assert outcome(run("zip", data, bounds=Bounds(zip_max_total_bytes=10_239))) == "rejected:archive_limit"


def test_entry_count_bound(run) -> None:
    ok = run("zip", make_zip([(f"f{i}", b"") for i in range(1000)]))
    assert outcome(ok) == "ready" and ok.data["entries"] == 1000
    over = run("zip", make_zip([(f"f{i}", b"") for i in range(1001)]))
    assert outcome(over) == "rejected:archive_limit" and "1001" in over.message


@pytest.mark.parametrize(
    "name",
    [
        "../x",
        "..\\x",
        "a/../../x",
        "a\\..\\..\\x",
        "ok/..",
        "/abs",
        "\\abs",
        "C:/x",
        "C:\\x",
        "c:x",
    ],
)
def test_hostile_names(run, name: str) -> None:
    result = run("zip", make_zip([("fine.txt", b"1"), (name, b"2")]))
    assert outcome(result) == "rejected:archive_limit", result.message


def test_names_that_only_look_hostile_are_fine(run) -> None:
    result = run("zip", make_zip([("a..b/x", b"1"), ("..hidden", b"2"), ("dir/...", b"3"), ("ab:c", b"4")]))
    assert outcome(result) == "ready", result.message


@pytest.mark.parametrize("names", [("a.txt", "a.txt"), ("dir/a", "dir\\a"), ("dir/a", "dir/./a")])
def test_duplicate_names(run, names: tuple[str, str]) -> None:
    result = run("zip", make_zip([(names[0], b"1"), (names[1], b"2")]))
    assert outcome(result) == "rejected:archive_limit" and "duplicate" in result.message


def test_nesting_depth(run) -> None:
    ok = run("zip", nested(3))
    assert outcome(ok) == "ready", ok.message
    assert ok.data["max_depth"] == 3 and ok.data["nested_archives"] == 3
    too_deep = run("zip", nested(4))
    assert outcome(too_deep) == "rejected:archive_limit" and "deeper" in too_deep.message
    assert outcome(run("zip", nested(2), bounds=Bounds(zip_max_depth=1))) == "rejected:archive_limit"


def test_nested_bomb_is_caught_inside(run) -> None:
    inner = make_zip([("zeros", b"\0" * (5 << 20))])
    result = run("zip", make_zip([("inner.dat", inner)]))
    assert outcome(result) == "rejected:archive_limit" and "ratio" in result.message


def _symlink(name: str, target: str) -> tuple[zipfile.ZipInfo, bytes]:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info, target.encode()


def test_symlinks(run) -> None:
    inside = make_zip([("top/dir/file", b"x"), _symlink("top/dir/sub/link", "../file")])
    assert outcome(run("zip", inside)) == "ready"
    for target in ("../../../etc/passwd", "/etc/passwd", "..\\..\\..\\x"):
        escaping = make_zip([_symlink("top/link", target)])
        assert outcome(run("zip", escaping)) == "rejected:archive_limit", target


UNINSPECTABLE = {
    "implode": {"method": 6},
    "xz": {"method": 95},
    "ppmd": {"method": 98},
    "encrypted": {"flags": 0x01},
}


@pytest.mark.parametrize("kind", UNINSPECTABLE)
def test_members_that_cannot_be_inflated_are_rejected(run, kind: str) -> None:
    # The bytes stay stored EICAR: whatever the method claims, no scan ever sees them.
    data = zip_patched(
        make_zip([("readme.txt", b"hello"), ("tools/eicar.com", EICAR)], method=zipfile.ZIP_STORED),
        **UNINSPECTABLE[kind],
    )
    result = run("zip", data, member_rules=RULES)
    assert outcome(result) == "rejected:archive_uninspectable", result.message
    assert "'readme.txt'" in result.message and "cannot be inflated or scanned" in result.message


def test_an_uninspectable_member_one_level_down_is_rejected(run) -> None:
    inner = zip_patched(make_zip([("bomb.bin", b"\0" * 1000)]), method=6)
    result = run("zip", make_zip([("inner.zip", inner), ("a.txt", b"x")]), member_rules=RULES)
    assert outcome(result) == "rejected:archive_uninspectable" and "bomb.bin" in result.message


@pytest.mark.parametrize("kind", UNINSPECTABLE)
def test_the_setting_lets_them_through_unscanned_on_their_declared_sizes(run, kind: str) -> None:
    data = zip_patched(make_zip([("secret.txt", b"s" * 100)]), **UNINSPECTABLE[kind])
    allow = Bounds(zip_allow_uninspectable=True)
    result = run("zip", data, bounds=allow, member_rules=RULES)
    assert outcome(result) == "ready", result.message
    assert result.data["uninspectable_entries"] == 1 and result.data["scanned_entries"] == 0
    assert result.data["encrypted_entries"] == (kind == "encrypted")
    # Declared sizes still count: a Deflate64 "bomb" over the ratio is archive_limit either way.
    bomb = zip_patched(make_zip([("zeros", b"\0" * (10 << 20))]), **UNINSPECTABLE[kind])
    assert outcome(run("zip", bomb, bounds=allow)) == "rejected:archive_limit"


@pytest.mark.parametrize("data", [b"PK\x03\x04garbage", b"", b"not a zip at all" * 10])
def test_corrupt_zip(run, data: bytes) -> None:
    assert outcome(run("zip", data)) == "rejected:corrupt"


def test_truncated_zip_is_corrupt(run) -> None:
    data = make_zip([("a.txt", b"hello world" * 100), ("b.txt", b"bye" * 100)])
    assert outcome(run("zip", data[: len(data) // 2])) == "rejected:corrupt"
    # central directory intact but the local headers it points to are gone
    cd = data.index(b"PK\x01\x02")
    assert outcome(run("zip", b"\0" * cd + data[cd:])) == "rejected:corrupt"


def _lie(data: bytes, declared: int) -> bytes:
    from tests.corpus.make_generated import lie_about_size

    return lie_about_size(data, declared)


@pytest.mark.parametrize("method", [zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED, zipfile.ZIP_BZIP2])
def test_an_entry_that_inflates_past_its_declared_size_is_rejected(run, method: int) -> None:
    # The declared sizes pass every bound (ratio under 1); only the bytes produced tell.
    data = _lie(make_zip([("a.txt", b"x" * (4 << 20))], method=method), 1000)
    result = run("zip", data)
    assert outcome(result) == "rejected:archive_limit", result.message
    assert "declared size of 1000" in result.message


def test_a_lie_is_caught_at_the_first_byte_past_the_claim(run) -> None:
    # 300 MiB of zeros claiming 100 KiB: rejected long before it is all inflated (the
    # job's 1 s of CPU would not be enough to inflate it; a generous 10 s wall).
    from processing.sandbox import Limits

    data = _lie(make_zip([("big", bytes(300 << 20))]), 100 << 10)
    result = run("zip", data, limits=Limits(cpu_seconds=1, wall_seconds=10))
    assert outcome(result) == "rejected:archive_limit", result.message


def test_an_entry_shorter_than_declared_or_with_a_bad_crc_is_corrupt(run) -> None:
    short = _lie(make_zip([("a.txt", b"hello" * 100)]), 501)
    assert outcome(run("zip", short)) == "rejected:corrupt"
    data = bytearray(make_zip([("a.txt", b"hello" * 100)], method=zipfile.ZIP_STORED))
    data[data.index(b"hello")] = ord("j")  # content changed, CRC not
    result = run("zip", bytes(data))
    assert outcome(result) == "rejected:corrupt" and "CRC" in result.message


def test_honest_entries_report_what_they_inflate_to(run) -> None:
    result = run("zip", make_zip([("a.txt", b"a" * 5000), ("b/", b""), ("c.txt", b"")]))
    assert outcome(result) == "ready"
    assert result.data["inflated_bytes"] == result.data["total_bytes"] == 5000


RULES = Path(__file__).resolve().parents[2] / "processing" / "rules"
# Assembled at run time so this file is not itself flagged by antivirus software.
EICAR = b"X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR" + b"-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"


@pytest.mark.parametrize("method", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2])
def test_members_are_scanned_inflated(run, method: int) -> None:
    data = make_zip([("readme.txt", b"hello"), ("tools/eicar.com", EICAR)], method=method)
    result = run("zip", data, member_rules=RULES)
    assert outcome(result) == "rejected:malware", result.message
    assert result.message == "yara: EICAR_Test_File in entry 'tools/eicar.com'"
    assert outcome(run("zip", data)) == "ready"  # without member rules nothing looks inside


def test_members_of_nested_archives_are_scanned(run) -> None:
    inner = make_zip([("deep/eicar.com", EICAR)])
    result = run("zip", make_zip([("inner.bin", inner), ("a.txt", b"x")]), member_rules=RULES)
    assert outcome(result) == "rejected:malware" and "deep/eicar.com" in result.message


def test_policy_rules_apply_to_members(run) -> None:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buf, "PNG")
    polyglot = buf.getvalue() + b"<script>alert(document.cookie)</script>"
    result = run("zip", make_zip([("holiday.png", polyglot)]), member_rules=RULES)
    assert outcome(result) == "rejected:malware" and "Image_Hides_Html_Script" in result.message


def test_clean_members_are_all_scanned(run) -> None:
    result = run("zip", nested(2), member_rules=RULES)
    assert outcome(result) == "ready", result.message
    # 2 levels x (payload.bin + readme.txt) + leaf.txt: every entry, nested zips included
    assert result.data["scanned_entries"] == 5


def test_a_member_too_large_to_hold_for_the_scan_is_archive_limit(run) -> None:
    # The hold budget is the nested-archive one (256 MiB): a 300 MiB member is refused
    # when members are scanned (a partial scan could only ever call it clean).
    big = make_zip([("big.bin", bytes(300 << 20))])
    result = run("zip", big, member_rules=RULES, bounds=Bounds(zip_max_ratio=1e6))
    assert outcome(result) == "rejected:archive_limit" and "too large to inspect" in result.message


def test_the_listing_keeps_the_first_top_level_names_and_sizes_shortened(run) -> None:
    """The console's archive listing is recorded here (never made at view time): bounded in count and length."""
    from processing.sandbox.archives import LISTING_MAX, LISTING_NAME_CHARS

    long_name = "a" * (LISTING_NAME_CHARS + 40) + ".txt"
    entries = [(long_name, b"x" * 3)] + [(f"f{i:04d}.txt", b"y" * i) for i in range(LISTING_MAX + 5)]
    result = run("zip", make_zip(entries + [("inner.zip", make_zip([("deep.txt", b"z")]))]))
    assert outcome(result) == "ready"
    listing = result.data["listing"]
    assert len(listing) == LISTING_MAX and result.data["entries"] == LISTING_MAX + 7
    assert listing[0] == ["a" * LISTING_NAME_CHARS, 3]
    assert listing[1:3] == [["f0000.txt", 0], ["f0001.txt", 1]]
    assert all(name != "deep.txt" for name, _ in listing)  # a nested archive's members are not listed
