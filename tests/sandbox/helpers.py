"""Helpers shared by the sandbox tests (no Django: these tests never touch the database)."""

from __future__ import annotations

import io
import random
import struct
import zlib
from pathlib import Path

from PIL import Image

from processing.sandbox import SandboxResult
from tests.corpus import corpus_dir  # noqa: F401  (re-exported for the sandbox tests)


def outcome(result: SandboxResult) -> str:
    """The manifest's spelling: ready | rejected:<code>."""
    return "ready" if result.outcome == "ok" else f"rejected:{result.reason_code}"


def noisy_png(width: int = 640, height: int = 360) -> bytes:
    """A PNG whose pixels make a real deflate stream (not one long run), split into IDATs."""
    rng = random.Random(5)
    pixels = bytes(rng.getrandbits(8) & 0xF0 for _ in range(width * height * 3))
    buf = io.BytesIO()
    Image.frombytes("RGB", (width, height), pixels).save(buf, "PNG")
    return buf.getvalue()


def with_invalid_deflate(png: bytes) -> bytes:
    """The first IDAT's deflate stream turned into a reserved block type (3), under a valid
    chunk CRC: only inflate can tell. (Bits flipped at random may decode to wrong pixels
    unnoticed: Pillow stops reading before the Adler-32 at the stream's end.)"""
    at = png.index(b"IDAT")
    length = struct.unpack(">I", png[at - 4 : at])[0]
    chunk = b"IDAT" + png[at + 4 : at + 6] + b"\xff" * (length - 2)  # keep the 2-byte zlib header
    return png[: at - 4] + struct.pack(">I", length) + chunk + struct.pack(">I", zlib.crc32(chunk)) + png[
        at + 4 + length + 4 :
    ]
