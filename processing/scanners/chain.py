"""Run every configured scanner over one object, failing closed."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from .base import Scanner, ScannerError, Verdict
from .clamd import ClamdScanner
from .yara import YaraScanner


def scan_all(
    scanners: Sequence[Scanner], open_chunks: Callable[[], Iterable[bytes]], *, path: Path | None = None
) -> list[Verdict]:
    """Every scanner's verdict, in order; any ScannerError propagates.

    `path`: a local file with the same bytes, when the caller has one (handed to each scanner).

    Each scanner gets a fresh iterator from open_chunks(), so one scanner
    consuming the stream cannot hand the next an empty (clean-looking) one.
    All scanners run even after an infected verdict: the audit trail then
    says who found what. An empty scanner list is an error, never "clean".
    """
    if not scanners:
        raise ScannerError("no scanners configured")
    verdicts: list[Verdict] = []
    for scanner in scanners:
        chunks = open_chunks()
        try:
            verdicts.append(scanner.scan(chunks, path=path))
        except ScannerError as exc:
            # Which scanner failed, for the error metric and the logs.
            exc.scanner = getattr(scanner, "name", "scanner")  # type: ignore[attr-defined]
            raise
        finally:
            # Release the storage handle even when the scanner stopped early.
            close = getattr(chunks, "close", None)
            if callable(close):
                close()
    return verdicts


def signature_version(scanners: Sequence[Scanner]) -> str:
    """Every scanner's version, in order, as one string: "clamd=ClamAV 1.4.2/…;yara=yara:3f…".

    Recorded with each verdict; when it differs from a file's, the file was
    judged by other signatures than the ones in force (processing/rescan/jobs.py).
    """
    if not scanners:
        raise ScannerError("no scanners configured")
    versions = []
    for scanner in scanners:
        try:
            versions.append(f"{scanner.name}={scanner.version()}")
        except ScannerError as exc:
            exc.scanner = getattr(scanner, "name", "scanner")  # type: ignore[attr-defined]
            raise
    return ";".join(versions)[:300]


def first_infected(verdicts: Iterable[Verdict]) -> Verdict | None:
    return next((v for v in verdicts if v.infected), None)


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes", "on"}
    return bool(value)


def scanners_from_settings() -> list[Scanner]:
    """Build the scanners Django's settings ask for: clamd first, then YARA.

    clamd is used only when CLAMD_SOCKET or CLAMD_HOST is set (the socket wins
    if both are). AIRLOCK_SCAN_TIMEOUT bounds each scanner. Raises
    ImproperlyConfigured when nothing would scan (that would pass everything).
    """
    from django.conf import settings  # the only Django import in this package
    from django.core.exceptions import ImproperlyConfigured

    timeout = float(getattr(settings, "AIRLOCK_SCAN_TIMEOUT", 30.0) or 30.0)
    scanners: list[Scanner] = []
    socket_path = getattr(settings, "CLAMD_SOCKET", None) or None
    host = getattr(settings, "CLAMD_HOST", None) or None
    if socket_path or host:
        port = int(getattr(settings, "CLAMD_PORT", 3310) or 3310)
        scanners.append(ClamdScanner(socket_path=socket_path, host=host, port=port, timeout=timeout))
    if _as_bool(getattr(settings, "AIRLOCK_YARA_ENABLED", True)):
        rules_dir = getattr(settings, "AIRLOCK_YARA_RULES_DIR", None)
        scanners.append(YaraScanner(rules_dir=Path(rules_dir) if rules_dir else None, timeout=timeout))
    if not scanners:
        raise ImproperlyConfigured("no scanner configured: set CLAMD_SOCKET/CLAMD_HOST or AIRLOCK_YARA_ENABLED")
    return scanners
