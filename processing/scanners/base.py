"""The scanner contract: a verdict is either clean or infected; anything else is an error.

There is deliberately no third outcome such as "unknown" or "skipped": a
scanner that cannot decide raises ScannerError, and the caller keeps the file
unreadable and retries. That is what "fail closed" means here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, Protocol, runtime_checkable

CLEAN: Final = "clean"
INFECTED: Final = "infected"


@dataclass(frozen=True)
class Verdict:
    scanner: str  # "clamd" | "yara"
    outcome: Literal["clean", "infected"]
    signature: str | None  # e.g. "Eicar-Test-Signature" or a YARA rule name; None when clean

    @property
    def infected(self) -> bool:
        return self.outcome == INFECTED


class ScannerError(Exception):
    """The scanner could not give a verdict (down, timeout, protocol error, size limit).

    Transient: the caller retries; never treated as clean.
    """


@runtime_checkable
class Scanner(Protocol):
    name: str

    def scan(self, chunks: Iterable[bytes], *, path: Path | None = None) -> Verdict:
        """Scan the object's bytes; `chunks` is a fresh iterator over them.

        `path`, when the caller has one, is a local file holding the same bytes (the
        worker's spool copy, local storage's own file); a scanner may read it instead.
        """
        ...

    def ping(self) -> float:
        """Seconds of round-trip latency; raises ScannerError when the scanner is down."""
        ...

    def version(self) -> str:
        """What this scanner's verdicts depend on (engine and signatures); raises ScannerError when down."""
        ...
