"""The SHA-256 a client may declare for its upload: parsed once, checked while the bytes stream."""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Iterable, Iterator

from .errors import BodyChecksumMismatch, ValidationFailed

_HEX = re.compile(r"^[0-9a-fA-F]{64}$")


def parse_sha256(value: object) -> str:
    """The declared digest as lowercase hex; '' when none was declared.

    Hex (64 digits) or standard base64 (44 characters, as S3's
    x-amz-checksum-sha256 and tus's Upload-Checksum carry it): the lengths
    never overlap, so either is read without a hint.
    """
    if value is None or value == "":
        return ""
    if not isinstance(value, str):
        raise ValidationFailed("sha256 must be a string.", details={"sha256": ["Not a string."]})
    if _HEX.match(value):
        return value.lower()
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 32:
        raise ValidationFailed(
            "sha256 is not a SHA-256 digest.", details={"sha256": ["64 hex digits or 44 characters of base64."]}
        )
    return raw.hex()


def sha256_base64(hex_digest: str) -> str:
    """The form S3's x-amz-checksum-sha256 header wants."""
    return base64.b64encode(bytes.fromhex(hex_digest)).decode("ascii")


def digest_checked(chunks: Iterable[bytes], expected_hex: str) -> Iterator[bytes]:
    """Pass chunks through, hashing them; at the end, refuse a body whose SHA-256 is not `expected_hex`.

    The refusal is raised from inside the stream, so a writer that keeps
    nothing of a stream that raises (the gateways' write_chunks) never stores it.
    """
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(chunk)
        yield chunk
    if digest.hexdigest() != expected_hex:
        raise BodyChecksumMismatch(
            f"The body's SHA-256 is {digest.hexdigest()}; the upload declared {expected_hex}. Nothing was kept.",
            details={"sha256": [f"Declared {expected_hex}, received {digest.hexdigest()}."]},
        )
