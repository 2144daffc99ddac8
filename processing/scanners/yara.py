"""YARA (yara-x) scanning with the rules shipped in processing/rules/.

Bounding, and why this way: yara-x scans one contiguous buffer. When the caller
has the bytes in a local file (the worker's spool copy, local storage's own
file) it is scanned in place with ``scan_file``; otherwise the object is
collected first. Objects up to SPOOL_THRESHOLD stay in memory; larger ones
are spooled to a temporary file and scanned with ``scan_file``, which yara-x
memory-maps (a few MB of anonymous memory whatever the size; the rest is
reclaimable page cache). So the whole object is scanned, not a
prefix, and memory stays flat. An object over ``max_bytes`` (default 1100 MiB,
above the largest profile's 1 GiB and equal to clamd's StreamMaxLength)
cannot have passed intake legitimately; it raises ScannerError instead of
being scanned partially, because a partial scan could only ever say "clean"
about bytes it never saw.
"""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

import yara_x

from .base import CLEAN, INFECTED, ScannerError, Verdict

NAME = "yara"
DEFAULT_RULES_DIR = Path(__file__).resolve().parent.parent / "rules"
DEFAULT_MAX_BYTES = 1100 * 1024 * 1024
SPOOL_THRESHOLD = 16 * 1024 * 1024

# Compiled rules, one entry per rules dir, keyed by its files' names, mtimes
# and sizes: compiling happens once per process unless a rule file changes.
# Beside them, the hash of the sources they were compiled from (their version).
_compiled: dict[Path, tuple[tuple[tuple[str, int, int], ...], yara_x.Rules, str]] = {}
_compile_lock = threading.Lock()


def _rule_files(rules_dir: Path) -> list[Path]:
    if not rules_dir.is_dir():
        raise ScannerError(f"YARA rules dir {rules_dir} does not exist")
    files = sorted(p for p in rules_dir.glob("*.yar") if p.is_file())
    if not files:
        # An empty rule set matches nothing: YARA would call everything clean.
        raise ScannerError(f"no *.yar files in {rules_dir}")
    return files


def load_rules(rules_dir: Path) -> yara_x.Rules:
    """Compile every *.yar in rules_dir (cached); any rule error is fatal.

    yara-x would otherwise drop a broken rule and keep going, silently
    scanning with fewer rules than shipped.
    """
    return _load(rules_dir)[0]


def _load(rules_dir: Path) -> tuple[yara_x.Rules, str]:
    rules_dir = rules_dir.resolve()
    with _compile_lock:
        files = _rule_files(rules_dir)
        try:
            fingerprint = tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in files)
        except OSError as exc:
            raise ScannerError(f"cannot stat YARA rules in {rules_dir}: {exc}") from exc
        cached = _compiled.get(rules_dir)
        if cached is not None and cached[0] == fingerprint:
            return cached[1], cached[2]
        compiler = yara_x.Compiler()
        compiler.enable_includes(False)  # rules must be self-contained files in this dir
        digest = hashlib.sha256()
        for path in files:
            # One namespace per file, so two files may reuse a rule name.
            compiler.new_namespace(path.stem)
            try:
                source = path.read_text(encoding="utf-8")
                compiler.add_source(source, origin=str(path))
            except (yara_x.CompileError, OSError, UnicodeDecodeError) as exc:
                raise ScannerError(f"YARA rules in {path} do not compile: {exc}") from exc
            digest.update(f"{path.name}\0{len(source.encode())}\0".encode())
            digest.update(source.encode())
        rules = compiler.build()
        version = f"yara:{digest.hexdigest()[:16]}"
        _compiled[rules_dir] = (fingerprint, rules, version)
        return rules, version


# Said plainly by /readyz and the README: what the embedded scanner is, and is not.
COVERAGE = {
    "detects": (
        "the EICAR test file; file-type policy (processing/rules/policy.yar): executables or "
        "HTML scripts hidden in images, executables or /Launch actions in PDFs; the same "
        "inside every ZIP member, scanned inflated in the sandbox"
    ),
    "does_not_detect": (
        "real malware: the shipped rules carry no virus signatures. Malware detection "
        "needs clamd (CLAMD_SOCKET or CLAMD_HOST) with signatures kept fresh by freshclam"
    ),
}


class YaraScanner:
    name = NAME
    coverage = COVERAGE

    def __init__(
        self,
        *,
        rules_dir: Path | None = None,
        timeout: float = 10.0,
        max_bytes: int = DEFAULT_MAX_BYTES,
        spool_dir: Path | None = None,
    ) -> None:
        if timeout <= 0 or max_bytes <= 0:
            raise ValueError("timeout and max_bytes must be positive")
        self.rules_dir = Path(rules_dir) if rules_dir is not None else DEFAULT_RULES_DIR
        # yara-x takes whole seconds; round up so a timeout is never shorter than asked.
        self.timeout_seconds = max(1, math.ceil(timeout))
        self.max_bytes = max_bytes
        self.spool_dir = spool_dir
        self._rules, self._version = _load(self.rules_dir)  # raises ScannerError on a bad dir

    def __repr__(self) -> str:
        return f"YaraScanner({self.rules_dir}, timeout={self.timeout_seconds}s)"

    def version(self) -> str:
        """ "yara:<first 16 hex of SHA-256>" over the compiled rule files' names and sources.

        Stable across hosts and restarts (mtimes are not part of it), and different
        as soon as one rule is added, removed or edited.
        """
        return self._version

    def ping(self) -> float:
        # In-process engine: "up" means the rules compiled, checked at construction.
        return 0.0

    def scan(self, chunks: Iterable[bytes], *, path: Path | None = None) -> Verdict:
        """The verdict on the bytes; from `path` when the caller has them in a local file.

        A file is scanned as it is (yara-x memory-maps it) and `chunks` is not read:
        no second copy of a 1 GiB video on disk, no second pass over it.
        """
        scanner = yara_x.Scanner(self._rules)  # cheap (~10 µs); never shared across threads
        scanner.set_timeout(self.timeout_seconds)
        if path is not None:
            try:
                size = os.stat(path).st_size
            except OSError as exc:
                raise ScannerError(f"YARA cannot read {path}: {exc}") from exc
            if size > self.max_bytes:
                raise ScannerError(f"object exceeds YARA max_bytes={self.max_bytes}; not scanned")
            return self._verdict(lambda: scanner.scan_file(str(path)))
        with _Collector(self.max_bytes, self.spool_dir) as collected:
            # Exceptions from the iterator itself (storage errors) propagate unchanged.
            for chunk in chunks:
                collected.add(chunk)
            spool = collected.spool
            if spool is None:
                return self._verdict(lambda: scanner.scan(b"".join(collected.parts)))
            spool.flush()
            return self._verdict(lambda: scanner.scan_file(spool.name))

    def _verdict(self, scan: Callable[[], yara_x.ScanResults]) -> Verdict:
        try:
            results = scan()
        except yara_x.TimeoutError as exc:
            raise ScannerError(f"YARA scan timed out after {self.timeout_seconds}s") from exc
        except (yara_x.ScanError, OSError) as exc:
            raise ScannerError(f"YARA scan failed: {exc}") from exc
        matches = results.matching_rules
        if matches:
            return Verdict(NAME, INFECTED, matches[0].identifier)
        return Verdict(NAME, CLEAN, None)


class _Collector:
    """The object's bytes: in memory up to SPOOL_THRESHOLD, then in a temp file."""

    def __init__(self, max_bytes: int, spool_dir: Path | None) -> None:
        self.max_bytes = max_bytes
        self.spool_dir = spool_dir
        self.parts: list[bytes] = []
        self.total = 0
        self.spool: IO[bytes] | None = None

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if self.total > self.max_bytes:
            raise ScannerError(f"object exceeds YARA max_bytes={self.max_bytes}; not scanned")
        if self.spool is None and self.total <= SPOOL_THRESHOLD:
            self.parts.append(bytes(chunk))
            return
        try:
            if self.spool is None:
                self.spool = tempfile.NamedTemporaryFile(prefix="airlock-yara-", dir=self.spool_dir)
                self.spool.writelines(self.parts)
                self.parts.clear()
            self.spool.write(chunk)
        except OSError as exc:  # disk full, unwritable spool dir
            raise ScannerError(f"YARA spooling failed: {exc}") from exc

    def __enter__(self) -> _Collector:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.spool is not None:
            self.spool.close()  # NamedTemporaryFile deletes itself on close
