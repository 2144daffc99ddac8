"""Malware scanning for Airlock: clamd (INSTREAM) and YARA (yara-x), failing closed.

A scanner returns a Verdict ("clean" or "infected") or raises ScannerError;
there is no other outcome. Nothing here imports Django except
scanners_from_settings(), which reads settings lazily.
"""

from .base import CLEAN, INFECTED, Scanner, ScannerError, Verdict
from .chain import first_infected, scan_all, scanners_from_settings, signature_version
from .clamd import ClamdScanner
from .yara import YaraScanner

__all__ = [
    "CLEAN",
    "INFECTED",
    "ClamdScanner",
    "Scanner",
    "ScannerError",
    "Verdict",
    "YaraScanner",
    "first_infected",
    "scan_all",
    "scanners_from_settings",
    "signature_version",
]
