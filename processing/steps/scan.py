"""Scan: every configured scanner must say clean; an error is never clean."""

from __future__ import annotations

import time
from collections.abc import Iterable

from django.utils import timezone

from attachments.facts import FileFacts
from processing import scanners as scanning  # looked up per call: tests replace scan_all
from processing.errors import ContentRejected, TransientError
from processing.metrics import record_scan_verdicts
from processing.stages import SCAN

from .base import SandboxStep, Step, StepInput, StepResult, decoder_among

LIMIT_HEURISTIC = "Heuristics.Limits.Exceeded"  # clamd gave up on a bound, not a virus


def scan_verdict(given: StepInput) -> tuple[str | None, str]:
    """The first infected verdict as "scanner: signature" (or None), and the signatures it came from.

    The version is read before the scan: signatures only ever get newer, so a
    version that changed meanwhile is recorded as the older one and the file is
    rescanned once more, never skipped.
    """
    scanners = scanning.scanners_from_settings()
    if not scanners:
        raise TransientError("no scanner is configured")
    assert given.chunks is not None
    version = scanning.signature_version(scanners)
    verdicts = scanning.scan_all(scanners, given.chunks, path=given.path)
    record_scan_verdicts(verdicts)
    infected = [v for v in verdicts if v.outcome != "clean"]
    if infected:
        return f"{infected[0].scanner}: {infected[0].signature or 'infected'}", version
    return None, version


class Scan(Step):
    name = "scan"
    stage = SCAN.name

    def __init__(self, decoders: Iterable[SandboxStep]) -> None:
        self.decoders = tuple(decoders)  # whose bound_reason names a scanner's size/nesting bound

    def run(self, given: StepInput) -> StepResult:
        started = time.monotonic()
        signature, version = scan_verdict(given)
        if signature and LIMIT_HEURISTIC in signature:
            decoder = decoder_among(self.decoders, given.profile, given.content_type)
            raise ContentRejected(decoder.bound_reason if decoder else "too_large", signature)
        if signature:
            raise ContentRejected("malware", signature)
        return StepResult(
            facts=FileFacts(scan_signatures=version, scanned_at=timezone.now()),
            metadata={"scan": {"duration_ms": round((time.monotonic() - started) * 1000, 1)}},
        )
