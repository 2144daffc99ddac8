"""Generated PDF fixtures: page bound by walking the tree, truncation, encryption, text cap."""

from __future__ import annotations

import io
from pathlib import Path

from pypdf import PdfWriter
from pypdf.generic import NameObject, NumberObject

from processing.sandbox import Bounds
from processing.sandbox.pdfs import process
from tests.sandbox.helpers import corpus_dir, outcome


def blank_pdf(pages: int, **encrypt: str) -> bytes:
    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(72, 72)
    if encrypt:
        writer.encrypt(**encrypt, algorithm="AES-256")
    buf = io.BytesIO()
    writer.write(buf)
    return buf.getvalue()


def test_2001_pages_is_page_limit(run) -> None:
    result = run("pdf", blank_pdf(2001))
    assert outcome(result) == "rejected:page_limit", result.message


def test_page_bound_is_inclusive(run) -> None:
    data = blank_pdf(5)
    ok = run("pdf", data, bounds=Bounds(max_pdf_pages=5))
    assert outcome(ok) == "ready" and ok.data["page_count"] == 5
    assert outcome(run("pdf", data, bounds=Bounds(max_pdf_pages=4))) == "rejected:page_limit"


def test_count_that_understates_is_not_trusted(run) -> None:
    data = blank_pdf(10)
    assert b"/Count 10" in data
    lying = data.replace(b"/Count 10", b"/Count 1 ")  # same length: offsets stay valid
    assert outcome(run("pdf", lying, bounds=Bounds(max_pdf_pages=5))) == "rejected:page_limit"


def test_page_referenced_twice_is_corrupt(run) -> None:
    # A /Kids array naming the same page object twice inflates the count (and is how page
    # tree cycles start): counted once per node, never trusted.
    writer = PdfWriter()
    writer.add_blank_page(72, 72)
    pages = writer._root_object["/Pages"]
    pages["/Kids"].append(pages["/Kids"][0])
    pages[NameObject("/Count")] = NumberObject(2)
    buf = io.BytesIO()
    writer.write(buf)
    result = run("pdf", buf.getvalue())
    assert outcome(result) == "rejected:corrupt" and "twice" in result.message


def test_truncated_pdf_is_corrupt(run) -> None:
    data = (corpus_dir() / "pypdf/crazyones.pdf").read_bytes()
    for cut in (0.3, 0.6, 0.95):
        assert outcome(run("pdf", data[: int(len(data) * cut)])) == "rejected:corrupt", cut
    assert outcome(run("pdf", b"%PDF-1.7\n")) == "rejected:corrupt"


def test_encryption(run) -> None:
    empty_user = run("pdf", blank_pdf(2, user_password="", owner_password="owner"))
    assert outcome(empty_user) == "ready" and empty_user.data["encrypted"] is True
    assert empty_user.data["page_count"] == 2
    locked = run("pdf", blank_pdf(2, user_password="secret", owner_password="owner"))
    assert outcome(locked) == "rejected:corrupt" and "password" in locked.message


def test_text_is_capped_and_thumbnail_rendered(run) -> None:
    result = run("pdf", corpus_dir() / "pypdf/crazyones.pdf", bounds=Bounds(max_text_chars=100))
    assert outcome(result) == "ready"
    assert result.data["text_chars"] == 100 and result.data["text_truncated"] is True
    assert len(result.files["text"].read_text("utf-8")) == 100
    assert max(result.data["thumbnail"].values()) == 256
    assert result.files["thumbnail"].read_bytes()[8:12] == b"WEBP"


def test_failed_render_is_not_a_rejection(tmp_path: Path) -> None:
    def broken_isolate(*_args: object) -> None:
        raise RuntimeError("render sub-child crashed")

    data, files = process(corpus_dir() / "pypdf/crazyones.pdf", tmp_path, Bounds(), isolate=broken_isolate)
    assert data["page_count"] == 1 and "thumbnail" not in data and set(files) == {"text"}


def test_crashing_sub_child_does_not_take_the_job_down(run) -> None:
    result = run("_test_isolated_crash", b"x")
    assert outcome(result) == "ready" and result.data == {"isolated_failed": True}
