"""Scan: every configured scanner must say clean; an error is never clean."""

from __future__ import annotations

import time

from processing.errors import ContentRejected, TransientError

from .base import Step, StepInput, StepResult

LIMIT_HEURISTIC = "Heuristics.Limits.Exceeded"  # clamd gave up on a bound, not a virus


def scan_verdict(given: StepInput) -> str | None:
    """The first infected verdict as "scanner: signature", or None; counts every verdict."""
    from processing.metrics import record_scan_verdicts
    from processing.scanners import scan_all, scanners_from_settings

    scanners = scanners_from_settings()
    if not scanners:
        raise TransientError("no scanner is configured")
    assert given.chunks is not None
    verdicts = scan_all(scanners, given.chunks)
    record_scan_verdicts(verdicts)
    infected = [v for v in verdicts if v.outcome != "clean"]
    if infected:
        return f"{infected[0].scanner}: {infected[0].signature or 'infected'}"
    return None


class Scan(Step):
    name = "scan"
    stage = "scan"

    def run(self, given: StepInput) -> StepResult:
        from .registry import decoder_for

        started = time.monotonic()
        signature = scan_verdict(given)
        if signature and LIMIT_HEURISTIC in signature:
            decoder = decoder_for(given.profile, given.content_type)
            raise ContentRejected(decoder.bound_reason if decoder else "too_large", signature)
        if signature:
            raise ContentRejected("malware", signature)
        return StepResult(metadata={"scan": {"duration_ms": round((time.monotonic() - started) * 1000, 1)}})
