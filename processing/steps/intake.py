"""Intake: believe storage, not the claim. Size from storage, type from the first bytes.

What the intent declared (its size, its SHA-256 when it gave one) must match
what storage holds: a store that cannot bound a body (a presigned PUT, an S3
stand-in that ignores POST policies or checksums) is caught here, before the
file is scanned, decoded or counted at its stored size.
"""

from __future__ import annotations

import hashlib

from attachments.facts import FileFacts
from processing.errors import ContentRejected
from processing.scanners import ScannerError
from processing.sniff import detect_type
from processing.stages import INTAKE

from .base import Step, StepInput, StepResult
from .scan import LIMIT_HEURISTIC, scan_verdict

# A file refused for its type is still scanned when small, so that malware is
# reported as malware (the more useful reason for support and for the uploader).
SCAN_REJECTS_UP_TO = 32 * 1024 * 1024


class Intake(Step):
    name = "intake"
    stage = INTAKE.name

    def run(self, given: StepInput) -> StepResult:
        profile, size = given.profile, given.size or 0
        if size > profile.max_bytes:
            raise ContentRejected("too_large", f"{size} bytes is over the {profile.max_bytes} byte limit.")
        if given.declared_size is not None and size != given.declared_size:
            raise ContentRejected("size_mismatch", f"Stored {size} bytes; the upload declared {given.declared_size}.")
        if given.declared_sha256:
            _check_digest(given)
        detected = detect_type(given.head)
        if not profile.allows(detected):
            signature = _malware_signature(given) if size <= SCAN_REJECTS_UP_TO else None
            if signature:
                raise ContentRejected("malware", signature)
            raise ContentRejected(
                "type_not_allowed",
                f"Detected type {detected or 'unknown'} is not allowed for profile {profile.name}.",
            )
        kind = profile.for_type(detected)
        if size > kind.max_bytes:  # a profile with kinds: the limit of the kind the bytes are
            raise ContentRejected(
                "too_large", f"{size} bytes is over the {kind.max_bytes} byte limit for a {kind.kind} ({detected})."
            )
        return StepResult(facts=FileFacts(stored_size=size, content_type=detected))


def _check_digest(given: StepInput) -> None:
    assert given.chunks is not None
    digest = hashlib.sha256()
    for chunk in given.chunks():
        digest.update(chunk)
    if digest.hexdigest() != given.declared_sha256:
        raise ContentRejected(
            "checksum_mismatch",
            f"The stored bytes' SHA-256 is {digest.hexdigest()}; the upload declared {given.declared_sha256}.",
        )


def _malware_signature(given: StepInput) -> str | None:
    try:
        signature = scan_verdict(given)[0]
    except ScannerError:
        return None  # it is rejected either way; the type decides the reason
    return None if signature and LIMIT_HEURISTIC in signature else signature
