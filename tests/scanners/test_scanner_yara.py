"""YARA scanner: the shipped EICAR rule, bounds, timeouts and rule loading."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from processing.scanners import ScannerError, YaraScanner
from processing.scanners import yara as yara_module
from tests.corpus import manifest_paths

from .support import CORPUS, EICAR

SHIPPED_RULES = Path(yara_module.__file__).resolve().parent.parent / "rules"


@pytest.fixture(scope="module")
def yara() -> YaraScanner:
    return YaraScanner()


def test_default_rules_dir_is_the_shipped_one(yara: YaraScanner) -> None:
    assert yara.rules_dir == SHIPPED_RULES
    assert (SHIPPED_RULES / "eicar.yar").is_file()


@pytest.mark.parametrize(
    "data",
    [
        EICAR,
        EICAR + b"\r\n",
        EICAR + b" \t\x1a\n",
        EICAR + b" " * 60,  # 128 bytes: the standard's maximum
    ],
    ids=["bare", "crlf", "mixed-whitespace", "128-bytes"],
)
def test_eicar_standard_forms_are_infected(yara: YaraScanner, data: bytes) -> None:
    verdict = yara.scan([data])
    assert verdict.outcome == "infected"
    assert verdict.scanner == "yara"
    assert verdict.signature == "EICAR_Test_File"


def test_eicar_split_across_chunks(yara: YaraScanner) -> None:
    chunks = [EICAR[:10], b"", EICAR[10:40], EICAR[40:]]
    assert yara.scan(iter(chunks)).outcome == "infected"


def test_eicar_corpus_file(yara: YaraScanner) -> None:
    assert yara.scan([(CORPUS / "fuzzdb" / "eicar.com.txt").read_bytes()]).infected


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"hello world\n",
        EICAR[:-1],  # truncated
        EICAR + b"x",  # trailing non-whitespace
        b"x" + EICAR,  # not at the start
        EICAR + b" " * 61,  # 129 bytes
    ],
    ids=["empty", "text", "truncated", "trailing-junk", "embedded", "129-bytes"],
)
def test_non_standard_forms_are_clean(yara: YaraScanner, data: bytes) -> None:
    verdict = yara.scan([data])
    assert verdict.outcome == "clean"
    assert verdict.signature is None


def test_shipped_rules_flag_only_what_they_are_for_in_corpus(yara: YaraScanner) -> None:
    # False-positive guard: of all the corpus files only the EICAR file and the two that
    # break the type policy match (ZIPs hiding EICAR only match member by member).
    files = sorted(p for p in CORPUS.glob("*/*") if p.is_file())
    assert {p.relative_to(CORPUS).as_posix() for p in files} == manifest_paths(CORPUS)  # every file, only those
    flagged = {p.relative_to(CORPUS).as_posix(): yara.scan([p.read_bytes()]).signature for p in files}
    assert {path: rule for path, rule in flagged.items() if rule} == {
        "fuzzdb/eicar.com.txt": "EICAR_Test_File",
        "clamav/clam.pdf": "Pdf_Hides_Executable",
        "generated/png_hides_elf.png": "Image_Hides_Executable",
    }


def _rules_dir(tmp_path: Path, source: str, name: str = "test.yar") -> Path:
    d = tmp_path / "rules"
    d.mkdir(exist_ok=True)
    (d / name).write_text(source)
    return d


def test_large_object_is_spooled_and_scanned_to_the_end(tmp_path: Path) -> None:
    rules = _rules_dir(tmp_path, 'rule Tail_Marker { strings: $m = "AIRLOCK-TAIL-MARKER" condition: $m }')
    scanner = YaraScanner(rules_dir=rules)
    block = b"\0" * (1024 * 1024)
    size = yara_module.SPOOL_THRESHOLD + 4 * len(block)

    def chunks(marker: bytes):
        for _ in range(size // len(block)):
            yield block
        yield marker

    verdict = scanner.scan(chunks(b"AIRLOCK-TAIL-MARKER"))
    assert verdict.outcome == "infected" and verdict.signature == "Tail_Marker"
    assert scanner.scan(chunks(b"nothing here")).outcome == "clean"


def test_object_over_max_bytes_is_an_error_not_clean(tmp_path: Path) -> None:
    scanner = YaraScanner(max_bytes=1000)
    assert scanner.scan([b"a" * 1000]).outcome == "clean"
    with pytest.raises(ScannerError, match="max_bytes"):
        scanner.scan([b"a" * 600, b"a" * 401])


def test_timeout_is_a_scanner_error(tmp_path: Path) -> None:
    # Quadratic loop over 100 kB: ~10^10 steps, far beyond one second.
    rules = _rules_dir(
        tmp_path,
        "rule Slow { condition: for any i in (0..filesize) : ( for any j in (0..filesize) :"
        " ( uint16(i) == 0x4242 and uint16(j) == 0x4343 ) ) }",
    )
    scanner = YaraScanner(rules_dir=rules, timeout=1.0)
    started = time.monotonic()
    with pytest.raises(ScannerError, match="timed out"):
        scanner.scan([b"\0" * 100_000])
    assert time.monotonic() - started < 5


def test_garbage_rules_fail_at_construction(tmp_path: Path) -> None:
    rules = _rules_dir(tmp_path, "rule Broken { condition: this is not yara }")
    with pytest.raises(ScannerError, match="do not compile"):
        YaraScanner(rules_dir=rules)


def test_one_bad_file_among_good_ones_still_fails(tmp_path: Path) -> None:
    # yara-x could skip the broken file; we must not scan with fewer rules than shipped.
    rules = _rules_dir(tmp_path, "rule Good { condition: false }", "a.yar")
    (rules / "b.yar").write_bytes(b"\xff\xfe not utf-8 {")
    with pytest.raises(ScannerError):
        YaraScanner(rules_dir=rules)


def test_missing_or_empty_rules_dir_fails(tmp_path: Path) -> None:
    with pytest.raises(ScannerError, match="does not exist"):
        YaraScanner(rules_dir=tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ScannerError, match="no \\*.yar"):
        YaraScanner(rules_dir=tmp_path / "empty")


def test_rules_compiled_once_and_recompiled_on_change(tmp_path: Path) -> None:
    rules = _rules_dir(tmp_path, 'rule First { strings: $a = "first" condition: $a }')
    a, b = YaraScanner(rules_dir=rules), YaraScanner(rules_dir=rules)
    assert a._rules is b._rules
    path = rules / "test.yar"
    path.write_text('rule Second { strings: $a = "second" condition: $a }')
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    c = YaraScanner(rules_dir=rules)
    assert c._rules is not a._rules
    assert c.scan([b"the second one"]).signature == "Second"
    assert a.scan([b"the first one"]).signature == "First"  # an existing scanner keeps its rules


def test_ping_is_zero_for_the_in_process_engine(yara: YaraScanner) -> None:
    assert yara.ping() == 0.0


def test_the_rules_version_is_a_stable_hash_of_their_sources(tmp_path: Path) -> None:
    import shutil

    rules = tmp_path / "rules"
    shutil.copytree(SHIPPED_RULES, rules)
    first = YaraScanner(rules_dir=rules).version()
    assert first == YaraScanner(rules_dir=SHIPPED_RULES).version()  # same sources, another directory
    assert first.startswith("yara:") and len(first) == len("yara:") + 16
    os.utime(rules / "eicar.yar", ns=(1, 1))  # touched, not changed: same version
    assert YaraScanner(rules_dir=rules).version() == first
    (rules / "extra.yar").write_text("rule Extra { condition: false }\n")
    added = YaraScanner(rules_dir=rules).version()
    assert added != first
    (rules / "extra.yar").write_text("rule Extra { condition: filesize == 1 }\n")
    assert YaraScanner(rules_dir=rules).version() not in (first, added)


def _no_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any temp file the YARA scanner would make fails the test."""
    import types

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("YARA wrote a temp copy of a file it was given")

    monkeypatch.setattr(yara_module, "tempfile", types.SimpleNamespace(NamedTemporaryFile=refused))


def _unread() -> Iterator[bytes]:
    raise AssertionError("the chunks were read although a local file was given")
    yield b""  # a generator: raising only when read


def test_a_large_local_file_is_scanned_in_place_with_no_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rules = _rules_dir(tmp_path, 'rule Tail_Marker { strings: $m = "AIRLOCK-TAIL-MARKER" condition: $m }')
    scanner = YaraScanner(rules_dir=rules, spool_dir=tmp_path / "spool")
    _no_copies(monkeypatch)
    marked, plain = tmp_path / "marked.bin", tmp_path / "plain.bin"
    size = yara_module.SPOOL_THRESHOLD + 4 * 1024 * 1024  # what the chunk path spools to a temp file
    for path, tail in ((marked, b"AIRLOCK-TAIL-MARKER"), (plain, b"nothing here")):
        with open(path, "wb") as fh:
            fh.truncate(size)
            fh.seek(size)
            fh.write(tail)

    verdict = scanner.scan(_unread(), path=marked)
    assert verdict.outcome == "infected" and verdict.signature == "Tail_Marker"
    assert scanner.scan(_unread(), path=plain).outcome == "clean"


def test_eicar_is_found_from_the_path(yara: YaraScanner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _no_copies(monkeypatch)
    path = tmp_path / "eicar.com"
    path.write_bytes(EICAR + b"\r\n")
    verdict = yara.scan(_unread(), path=path)
    assert verdict.outcome == "infected" and verdict.signature == "EICAR_Test_File"
    path.write_bytes(b"clean bytes")
    assert yara.scan(_unread(), path=path).outcome == "clean"


def test_a_local_file_over_max_bytes_or_missing_is_an_error_not_clean(tmp_path: Path) -> None:
    scanner = YaraScanner(max_bytes=1000)
    path = tmp_path / "big.bin"
    path.write_bytes(b"a" * 1000)
    assert scanner.scan(_unread(), path=path).outcome == "clean"
    path.write_bytes(b"a" * 1001)
    with pytest.raises(ScannerError, match="max_bytes"):
        scanner.scan(_unread(), path=path)
    with pytest.raises(ScannerError, match="cannot read"):
        scanner.scan(_unread(), path=tmp_path / "gone.bin")
