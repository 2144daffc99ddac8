"""Intake: believe storage, not the claim. Size from storage, type from the first bytes."""

from __future__ import annotations

from processing.errors import ContentRejected

from .base import Step, StepInput, StepResult
from .scan import LIMIT_HEURISTIC, scan_verdict

# A file refused for its type is still scanned when small, so that malware is
# reported as malware (the more useful reason for support and for the uploader).
SCAN_REJECTS_UP_TO = 32 * 1024 * 1024


class Intake(Step):
    name = "intake"
    stage = "intake"

    def run(self, given: StepInput) -> StepResult:
        from processing.sniff import detect_type

        profile, size = given.profile, given.size or 0
        if size > profile.max_bytes:
            raise ContentRejected("too_large", f"{size} bytes is over the {profile.max_bytes} byte limit.")
        detected = detect_type(given.head)
        if not profile.allows(detected):
            signature = _malware_signature(given) if size <= SCAN_REJECTS_UP_TO else None
            if signature:
                raise ContentRejected("malware", signature)
            raise ContentRejected(
                "type_not_allowed",
                f"Detected type {detected or 'unknown'} is not allowed for profile {profile.name}.",
            )
        return StepResult(fields={"stored_size": size, "content_type": detected})


def _malware_signature(given: StepInput) -> str | None:
    from processing.scanners import ScannerError

    try:
        signature = scan_verdict(given)
    except ScannerError:
        return None  # it is rejected either way; the type decides the reason
    return None if signature and LIMIT_HEURISTIC in signature else signature
