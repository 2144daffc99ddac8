"""The file-type policy rules (processing/rules/policy.yar): one test per rule, each with
the polyglot it flags and the near-misses it must let through."""

from __future__ import annotations

import io
import struct

import pytest
from PIL import Image

from processing.scanners import YaraScanner

from .support import CORPUS


@pytest.fixture(scope="module")
def yara() -> YaraScanner:
    return YaraScanner()


def _verdict(yara: YaraScanner, data: bytes) -> str | None:
    return yara.scan([data]).signature


def _image(fmt: str) -> bytes:
    buf = io.BytesIO()
    Image.effect_noise((64, 64), 40).convert("RGB").save(buf, fmt)
    return buf.getvalue()


def _pe() -> bytes:
    """The smallest shape of a PE: DOS header whose e_lfanew points at "PE\\0\\0"."""
    dos = bytearray(b"MZ" + b"\0" * 0x3E)
    dos[0x3C:0x40] = struct.pack("<I", 0x80)
    return bytes(dos) + b"\0" * (0x80 - len(dos)) + b"PE\0\0" + b"\x4c\x01" + b"\0" * 64


def _elf() -> bytes:
    # ELF64, little-endian, SysV, ET_EXEC (2), EM_X86_64 (62)
    return b"\x7fELF\x02\x01\x01\x00" + b"\0" * 8 + struct.pack("<HH", 2, 62) + b"\0" * 44


def _pdf(body: bytes) -> bytes:
    return b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog >>\nendobj\n" + body + b"\n%%EOF\n"


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "GIF", "WEBP"])
@pytest.mark.parametrize("payload", ["pe", "elf"])
def test_image_hides_executable(yara, fmt: str, payload: str) -> None:
    program = _pe() if payload == "pe" else _elf()
    assert _verdict(yara, _image(fmt) + program) == "Image_Hides_Executable"
    assert _verdict(yara, _image(fmt)) is None
    # "MZ" or "\x7fELF" alone (they occur in pixel data) is not an executable
    assert _verdict(yara, _image(fmt) + b"MZ" + b"\0" * 200 + b"\x7fELF\x02\x01\x01\x00" + b"\0" * 40) is None
    # the program itself is not an image: this is type policy, not a virus signature
    assert _verdict(yara, program) is None


def test_image_hides_html_script(yara) -> None:
    script = b"<SCRIPT>fetch('/api/v1/attachments').then(r => r.text())</script>"
    assert _verdict(yara, _image("GIF") + script) == "Image_Hides_Html_Script"
    assert _verdict(yara, _image("PNG") + b"<script>unfinished") is None  # lottapixel.jpg's case
    assert _verdict(yara, b"<html>" + script) is None  # an HTML file is not an image


def test_pdf_hides_executable(yara) -> None:
    assert _verdict(yara, _pdf(b"2 0 obj\n<< /Length 300 >>\nstream\n" + _pe() + b"\nendstream\nendobj")) == (
        "Pdf_Hides_Executable"
    )
    assert _verdict(yara, _pdf(b"2 0 obj\n<< /Length 8 >>\nstream\nMZ......\nendstream\nendobj")) is None
    # ClamAV's clam.pdf embeds clam.exe uncompressed: the embedded default now refuses it too
    assert _verdict(yara, (CORPUS / "clamav/clam.pdf").read_bytes()) == "Pdf_Hides_Executable"


def test_pdf_launch_action(yara) -> None:
    launch = b"2 0 obj\n<< /Type /Action /S /Launch /F (cmd.exe) >>\nendobj"
    assert _verdict(yara, _pdf(launch)) == "Pdf_Launch_Action"
    assert _verdict(yara, _pdf(b"2 0 obj\n<< /S /JavaScript /JS (app.alert(1)) >>\nendobj")) is None
    assert _verdict(yara, _pdf(b"2 0 obj\n<< /Title (How to /Launch a product) >>\nendobj")) is None


def test_no_corpus_file_expected_ready_trips_a_policy_rule(yara) -> None:
    import csv

    with open(CORPUS / "MANIFEST.tsv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh, delimiter="\t") if r["expected"] == "ready"]
    flagged = {r["path"]: _verdict(yara, (CORPUS / r["path"]).read_bytes()) for r in rows}
    assert {path: rule for path, rule in flagged.items() if rule} == {}
    assert len(rows) > 20
