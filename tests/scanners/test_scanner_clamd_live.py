"""ClamdScanner against the real clamd that scripts/clamd.sh starts (CI does).

Every test here is marked ``clamd`` and fails, not skips, when clamd is down.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from processing.scanners import ClamdScanner, ScannerError
from tests.corpus import manifest_paths
from tests.support.processes import free_port

from .support import CLAMD_SH, CORPUS, EICAR, TESTFILES

pytestmark = pytest.mark.clamd

TESTFILE_NAMES = sorted(p.name for p in TESTFILES.iterdir()) if TESTFILES.is_dir() else []
CORPUS_CLAMAV = sorted(p.name for p in (CORPUS / "clamav").iterdir()) if CORPUS.is_dir() else []


def test_ping(clamd: ClamdScanner) -> None:
    assert 0 <= clamd.ping() < 1


def test_eicar_is_infected(clamd: ClamdScanner) -> None:
    verdict = clamd.scan([EICAR])
    assert verdict.outcome == "infected"
    assert verdict.scanner == "clamd"
    # clamd appends ".UNOFFICIAL" to names from a non-CVD database.
    assert verdict.signature is not None and verdict.signature.startswith("Eicar-Test-Signature")


def test_eicar_in_tiny_and_empty_chunks_is_infected(clamd: ClamdScanner) -> None:
    chunks = [b""] + [EICAR[i : i + 5] for i in range(0, len(EICAR), 5)] + [b""]
    assert clamd.scan(iter(chunks)).outcome == "infected"


def test_clean_bytes_are_clean(clamd: ClamdScanner) -> None:
    verdict = clamd.scan([b"just a harmless text file\n" * 1000])
    assert verdict.outcome == "clean" and verdict.signature is None


def test_empty_stream_is_clean(clamd: ClamdScanner) -> None:
    assert clamd.scan([]).outcome == "clean"


def test_all_44_clamav_testfiles_are_present() -> None:
    # Guards the parametrized test below against silently running on nothing.
    assert len(TESTFILE_NAMES) == 44, f"install clamav-testfiles ({TESTFILES})"


@pytest.mark.parametrize("name", TESTFILE_NAMES)
def test_clamav_testfile_is_infected(clamd: ClamdScanner, name: str) -> None:
    # Proves the shipped ClamAV-Test-File signature and clamd's unpacking
    # (zip, 7z, cab, pdf, OLE, packed PE, mail, ...).
    verdict = clamd.scan([(TESTFILES / name).read_bytes()])
    assert verdict.outcome == "infected"
    assert verdict.signature is not None and verdict.signature.startswith("ClamAV-Test-File")


def test_corpus_clamav_files_are_present() -> None:
    assert len(CORPUS_CLAMAV) == 7


@pytest.mark.parametrize("name", CORPUS_CLAMAV)
def test_corpus_clamav_file_is_infected(clamd: ClamdScanner, name: str) -> None:
    assert clamd.scan([(CORPUS / "clamav" / name).read_bytes()]).outcome == "infected"


def test_zip_bomb_with_overlapping_files_is_not_clean(clamd: ClamdScanner) -> None:
    verdict = clamd.scan([(CORPUS / "recursive-extractor" / "zbsm.zip").read_bytes()])
    assert verdict.outcome == "infected"
    assert verdict.signature == "Heuristics.Zip.OverlappingFiles"


# Files the shipped configuration flags in the corpus, and why. Anything else
# flagged is a false positive introduced by a config change.
EXPECTED_CORPUS_DETECTIONS = {
    **{f"clamav/{n}": "ClamAV-Test-File.UNOFFICIAL" for n in CORPUS_CLAMAV},
    "fuzzdb/eicar.com.txt": "Eicar-Test-Signature.UNOFFICIAL",
    "recursive-extractor/zbsm.zip": "Heuristics.Zip.OverlappingFiles",
    # A zip quine: infinitely nested, so MaxRecursion is always exceeded and
    # AlertExceedsMax reports it (without it clamd would say OK).
    "tika/droste.zip": "Heuristics.Limits.Exceeded.MaxRecursion",
}


def test_whole_corpus_detections_are_exactly_the_expected_ones(clamd: ClamdScanner) -> None:
    # Every file from other projects; generated/ (ours) is checked through the pipeline.
    files = sorted(p for p in CORPUS.glob("*/*") if p.is_file() and p.parent.name != "generated")
    listed = {p for p in manifest_paths(CORPUS) if not p.startswith("generated/")}
    assert {p.relative_to(CORPUS).as_posix() for p in files} == listed  # every file, and only those
    found = {}
    for path in files:
        verdict = clamd.scan([path.read_bytes()])
        if verdict.outcome != "clean":
            found[path.relative_to(CORPUS).as_posix()] = verdict.signature
    assert found == EXPECTED_CORPUS_DETECTIONS


def _zip(entries: int) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for i in range(entries):
            zf.writestr(f"f{i}.txt", b"x%d" % i)
    return buf.getvalue()


def test_archive_over_max_files_is_not_clean(clamd: ClamdScanner) -> None:
    # clamd's default would scan only the first MaxFiles entries and say OK.
    assert clamd.scan([_zip(1000)]).outcome == "clean"  # the archive profile's bound
    verdict = clamd.scan([_zip(10_001)])
    assert verdict.outcome == "infected"
    assert verdict.signature == "Heuristics.Limits.Exceeded.MaxFiles"


def test_nesting_over_max_recursion_is_not_clean(clamd: ClamdScanner) -> None:
    data = b"hello"
    for depth in range(20):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            zf.writestr("inner.zip" if depth else "a.txt", data)
        data = buf.getvalue()
    verdict = clamd.scan([data])
    assert verdict.outcome == "infected"
    assert verdict.signature == "Heuristics.Limits.Exceeded.MaxRecursion"


# --- a second clamd with a tiny StreamMaxLength --------------------------------


@pytest.fixture(scope="module")
def tiny_clamd() -> Iterator[ClamdScanner]:
    """clamd with StreamMaxLength 1M on its own dir and port, via scripts/clamd.sh."""
    if shutil.which("clamd") is None and not Path("/usr/sbin/clamd").exists():
        pytest.fail("clamd is not installed (scripts/clamd.sh install)")
    runtime = Path(tempfile.mkdtemp(prefix="alk-clamd-", dir="/tmp"))
    port = free_port()
    env = {
        **os.environ,
        "AIRLOCK_CLAMD_DIR": str(runtime),
        "AIRLOCK_CLAMD_PORT": str(port),
        "AIRLOCK_CLAMD_STREAM_MAX": "1M",
        "AIRLOCK_PYTHON": sys.executable,
    }
    started = subprocess.run(["bash", str(CLAMD_SH), "start"], env=env, capture_output=True, text=True)
    try:
        assert started.returncode == 0, started.stderr
        yield ClamdScanner(host="127.0.0.1", port=port, timeout=10)
    finally:
        subprocess.run(["bash", str(CLAMD_SH), "stop"], env=env, capture_output=True)
        shutil.rmtree(runtime, ignore_errors=True)


def test_tiny_clamd_scans_small_streams(tiny_clamd: ClamdScanner) -> None:
    # Same daemon as the next test: its error below is the limit, not "down".
    assert tiny_clamd.ping() >= 0
    assert tiny_clamd.scan([EICAR]).outcome == "infected"
    assert tiny_clamd.scan([b"a" * 512 * 1024]).outcome == "clean"


def test_stream_over_stream_max_length_is_an_error(tiny_clamd: ClamdScanner) -> None:
    # 3 MB against StreamMaxLength 1M: clamd replies "INSTREAM size limit
    # exceeded. ERROR" and hangs up mid-send. A "clean" verdict for a stream
    # clamd cut off is what must never happen.
    def big() -> Iterator[bytes]:
        for _ in range(48):
            yield b"\0" * 64 * 1024

    with pytest.raises(ScannerError, match="size limit|upload failed|closed|reading"):
        tiny_clamd.scan(big())


def test_version_names_the_engine(clamd: ClamdScanner) -> None:
    # With freshclam's databases the reply goes on with "/<daily version>/<date>"; the test
    # clamd loads only a local test-signature database, which VERSION does not describe.
    version = clamd.version()
    assert version.startswith("ClamAV ") and version == clamd.version()
