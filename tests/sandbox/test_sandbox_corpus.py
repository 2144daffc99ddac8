"""Every corpus file whose outcome the decoder step decides reaches it through run_job.

Rows decided at intake (type_not_allowed for a type the profile does not allow, by the
same filetype sniff intake uses) count only through their alt= outcome, if any. Rows
that only malware scanning rejects (needs-clamav-official-sigs) are expected `ready`
from the decoder, as the corpus README says for a pipeline without ClamAV.
"""

from __future__ import annotations

import csv
import re

import filetype
import pytest
from PIL import Image

from processing.sandbox import Bounds
from tests.sandbox.helpers import corpus_dir, outcome

KIND = {"image": "image", "document": "pdf", "archive": "zip", "media": "media"}
ALLOWED = {
    "image": {"image/jpeg", "image/png", "image/gif", "image/webp", "image/heic", "image/heif", "image/avif"},
    "document": {"application/pdf"},
    "archive": {"application/zip"},
    "media": {"video/mp4", "video/quicktime", "video/webm", "audio/mp4", "audio/mpeg", "audio/ogg", "audio/x-wav"},
}
INTAKE_CODES = {"type_not_allowed", "malware", "too_large"}


def _decoder_outcomes(row: dict[str, str]) -> set[str]:
    expected = row["expected"]
    codes = set() if expected == "ready" else set(expected.split(":", 1)[1].split(","))
    primary = {"ready"} if expected == "ready" else {f"rejected:{c}" for c in codes}
    alts = set(re.findall(r"alt=(\S+)", row["note"]))
    if "type_not_allowed" in codes:
        kind = filetype.guess(str(corpus_dir() / row["path"]))
        if kind is None or kind.mime not in ALLOWED[row["profile"]]:
            primary = set()  # intake rejects it; only an alternative policy reaches us
    accepted = {o for o in primary | alts if o == "ready" or o.split(":")[1] not in INTAKE_CODES}
    if codes == {"malware"} and "needs-clamav-official-sigs" in row["note"]:
        accepted.add("ready")
    return accepted


def _rows() -> list[tuple[str, str, set[str]]]:
    with open(corpus_dir() / "MANIFEST.tsv", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    cases = [(r["path"], KIND[r["profile"]], _decoder_outcomes(r)) for r in rows]
    return [c for c in cases if c[2]]


CASES = _rows()


def test_manifest_selection_is_not_empty() -> None:
    # Guards the filter above: if it ever dropped everything the corpus test would be vacuous.
    paths = {c[0] for c in CASES}
    assert len(CASES) >= 45
    assert {
        "pillow/decompression_bomb_extents.gif",
        "pdfjs/poppler-67295-0.pdf",
        "tika/droste.zip",
        "clamav/clam.zip",
    } <= paths
    assert "fuzzdb/eicar.com.txt" not in paths and "pillow/exif.avif" in paths


@pytest.mark.parametrize(("path", "kind", "accepted"), CASES, ids=[c[0] for c in CASES])
def test_corpus_outcome(run, path: str, kind: str, accepted: set[str]) -> None:
    result = run(kind, corpus_dir() / path)
    assert outcome(result) in accepted, (result.reason_code, result.message)
    if result.outcome != "ok":
        assert result.files == {}
        return
    for name, file in result.files.items():
        assert file.is_file() and file.parent == result.files[name].parent
        assert file.stat().st_size > 0 or name == "text"  # a PDF may have no text at all
    if kind == "image":
        with Image.open(result.files["thumbnail"]) as thumb:
            assert thumb.format == "WEBP"
            assert max(thumb.size) <= 256
            assert not thumb.getexif() and "icc_profile" not in thumb.info
            assert thumb.size == (
                result.data["thumbnail"]["width"],
                result.data["thumbnail"]["height"],
            )
        served = result.files.get("sanitized") or result.files["display"]  # display: HEIC/HEIF/AVIF
        with Image.open(served) as clean:
            assert sorted(clean.size) == sorted((result.data["width"], result.data["height"]))
    elif kind == "pdf":
        assert result.data["page_count"] >= 1
        text = result.files["text"].read_text("utf-8")
        assert result.data["text_chars"] <= len(text) + result.data["page_count"]
    elif kind == "media":
        assert result.data["duration_seconds"] > 0
        # Every ready media file has its served copy (remux); a video also a poster and a thumbnail.
        assert result.files["served"].stat().st_size > 0
        if result.data["video_codec"] is not None:
            assert set(result.files) == {"thumbnail", "poster", "served"}
            with Image.open(result.files["poster"]) as poster:
                assert poster.format == "WEBP" and max(poster.size) <= 1280
                assert poster.size == (result.data["width"], result.data["height"])
    else:
        assert result.data["entries"] >= 0


def test_corpus_specific_facts(run) -> None:
    c = corpus_dir()
    extents = run("image", c / "pillow/decompression_bomb_extents.gif")
    assert extents.data["thumbnail"] == {"width": 100, "height": 100}
    assert extents.peak_rss_kb is not None and extents.peak_rss_kb < 200_000  # never the grown canvas
    uber = run("image", c / "fuzzdb/uber.gif")
    assert uber.data["frames"] == 10_000  # 40,000 frames, counted up to the bound only
    poppler = run("pdf", c / "pdfjs/poppler-67295-0.pdf")
    assert poppler.data["page_count"] == 1
    assert "TestString123" in poppler.files["text"].read_text()
    issue117 = run("pdf", c / "qpdf/issue-117.pdf")
    assert issue117.data["page_count"] == 1 and issue117.data["text_errors"] == 1
    nested = run("zip", c / "recursive-extractor/TestDataArchivesNested.zip")
    assert nested.data["nested_archives"] == 1 and nested.data["max_depth"] == 1
    assert run("zip", c / "tika/test-documents-spanned.zip").reason_code == "corrupt"
    deflate64 = run("zip", c / "commons-compress/lorem-ipsum-deflate64.zip")  # inflated with inflate64
    assert deflate64.outcome == "ok" and deflate64.data["inflated_bytes"] == 144_060
    assert deflate64.data["uninspectable_entries"] == 0
    implode = run("zip", c / "clamav/clam.impl.zip")
    assert implode.reason_code == "archive_uninspectable" and "method 6" in implode.message
    allowed = run("zip", c / "clamav/clam.impl.zip", bounds=Bounds(zip_allow_uninspectable=True))
    assert allowed.outcome == "ok" and allowed.data["uninspectable_entries"] == 1
    aes = run("zip", c / "recursive-extractor/TestDataEncryptedAES.zip")
    assert aes.reason_code == "archive_uninspectable" and "encrypted" in aes.message
    symlinks = run("zip", c / "commons-compress/COMPRESS-214_unix_symlinks.zip")
    assert symlinks.data["symlinks"] == 9
    # zbsm with the size bounds lifted is still caught: its entries overlap
    lifted = run(
        "zip",
        c / "recursive-extractor/zbsm.zip",
        bounds=Bounds(zip_max_total_bytes=1 << 40, zip_max_ratio=1e9),
    )
    assert lifted.reason_code == "archive_limit" and "overlap" in lifted.message
