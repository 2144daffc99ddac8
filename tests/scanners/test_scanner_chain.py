"""scan_all and scanners_from_settings: fail closed, no Django settings needed."""

from __future__ import annotations

import re
import sys
import types
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from processing.scanners import (
    ClamdScanner,
    Scanner,
    ScannerError,
    Verdict,
    YaraScanner,
    first_infected,
    scan_all,
    scanners_from_settings,
)

from .support import EICAR, REPO


class Recording:
    """A scanner double that records what it read and answers as told."""

    def __init__(self, name: str, answer: Verdict | ScannerError) -> None:
        self.name = name
        self.answer = answer
        self.seen: list[bytes] = []
        self.paths: list[Path | None] = []

    def scan(self, chunks: Iterable[bytes], *, path: Path | None = None) -> Verdict:
        self.seen.append(b"".join(chunks))
        self.paths.append(path)
        if isinstance(self.answer, ScannerError):
            raise self.answer
        return self.answer

    def ping(self) -> float:
        return 0.0

    def version(self) -> str:
        return f"{self.name}-v1"


CLEAN = Verdict("yara", "clean", None)
INFECTED = Verdict("clamd", "infected", "Eicar-Test-Signature")


def _open() -> Iterator[bytes]:
    yield b"hello "
    yield b"world"


def test_doubles_satisfy_the_protocol() -> None:
    assert isinstance(Recording("x", CLEAN), Scanner)
    assert isinstance(YaraScanner(), Scanner)
    assert isinstance(ClamdScanner(socket_path="/nonexistent"), Scanner)


def test_every_scanner_runs_on_a_fresh_iterator() -> None:
    a, b = Recording("clamd", INFECTED), Recording("yara", CLEAN)
    verdicts = scan_all([a, b], _open)
    assert verdicts == [INFECTED, CLEAN]  # the second still runs after a detection
    assert a.seen == b.seen == [b"hello world"]
    assert first_infected(verdicts) == INFECTED
    assert first_infected([CLEAN]) is None


@pytest.mark.parametrize("error_first", [True, False])
def test_scanner_error_propagates_even_if_another_said_clean(error_first: bool) -> None:
    down = Recording("clamd", ScannerError("clamd unreachable"))
    ok = Recording("yara", CLEAN)
    with pytest.raises(ScannerError, match="unreachable"):
        scan_all([down, ok] if error_first else [ok, down], _open)


def test_no_scanners_is_an_error_not_clean() -> None:
    with pytest.raises(ScannerError):
        scan_all([], _open)


def test_iterator_is_closed_when_a_scanner_stops_early() -> None:
    closed = []

    def opener() -> Iterator[bytes]:
        try:
            yield b"a"
            yield b"b"
        finally:
            closed.append(True)

    class FirstChunkOnly(Recording):
        def scan(self, chunks: Iterable[bytes], *, path: Path | None = None) -> Verdict:
            next(iter(chunks))
            raise ScannerError("stop")

    with pytest.raises(ScannerError):
        scan_all([FirstChunkOnly("x", CLEAN)], opener)
    assert closed == [True]


def test_a_local_file_is_handed_to_every_scanner(tmp_path: Path) -> None:
    a, b = Recording("clamd", CLEAN), Recording("yara", CLEAN)
    scan_all([a, b], _open, path=tmp_path / "object")
    assert a.paths == b.paths == [tmp_path / "object"]
    assert a.seen == b.seen == [b"hello world"]  # the stream is still there for those that read it
    scan_all([a], _open)
    assert a.paths[-1] is None


def test_real_yara_through_scan_all() -> None:
    verdicts = scan_all([YaraScanner()], lambda: iter([EICAR[:30], EICAR[30:]]))
    assert verdicts[0].outcome == "infected"


# --- scanners_from_settings (django.conf replaced by a stub) -------------------


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    stub_settings = types.SimpleNamespace()
    module = types.ModuleType("django.conf")
    module.settings = stub_settings  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "django.conf", module)
    return stub_settings


def test_settings_yara_only_by_default(settings: types.SimpleNamespace) -> None:
    scanners = scanners_from_settings()
    assert [s.name for s in scanners] == ["yara"]


def test_settings_socket_first_then_yara(settings: types.SimpleNamespace, tmp_path: Path) -> None:
    (tmp_path / "r.yar").write_text("rule R { condition: false }")
    settings.CLAMD_SOCKET = "/run/clamd.sock"
    settings.CLAMD_HOST = "ignored.example"
    settings.AIRLOCK_SCAN_TIMEOUT = "12.5"
    settings.AIRLOCK_YARA_RULES_DIR = str(tmp_path)
    clamd, yara = scanners_from_settings()
    assert isinstance(clamd, ClamdScanner) and isinstance(yara, YaraScanner)
    assert clamd.socket_path == "/run/clamd.sock" and clamd.host is None
    assert clamd.timeout == 12.5
    assert yara.rules_dir == tmp_path and yara.timeout_seconds == 13


def test_settings_host_and_port(settings: types.SimpleNamespace) -> None:
    settings.CLAMD_HOST = "clamav"
    settings.CLAMD_PORT = "3311"
    settings.AIRLOCK_YARA_ENABLED = False
    (clamd,) = scanners_from_settings()
    assert isinstance(clamd, ClamdScanner)
    assert (clamd.host, clamd.port, clamd.timeout) == ("clamav", 3311, 30.0)


def test_settings_with_nothing_enabled_refuses(settings: types.SimpleNamespace) -> None:
    from django.core.exceptions import ImproperlyConfigured

    settings.AIRLOCK_YARA_ENABLED = "false"
    with pytest.raises(ImproperlyConfigured):
        scanners_from_settings()


# --- the shipped clamd configuration ------------------------------------------


def _size(value: str) -> int:
    units = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}
    m = re.fullmatch(r"(\d+)([KMG]?)", value.upper())
    assert m, value
    return int(m.group(1)) * units[m.group(2)]


def test_shipped_clamd_config_fails_closed() -> None:
    template = (REPO / "scripts" / "clamd" / "clamd.conf.template").read_text()
    lines = [line.split(None, 1) for line in template.splitlines() if not line.startswith("#")]
    conf = dict(parts for parts in lines if len(parts) == 2)  # skips blanks and @USER_LINE@
    gib = 1024**3
    assert conf["AlertExceedsMax"] == "yes"
    assert conf["HeuristicAlerts"] == "yes"
    assert _size(conf["MaxFileSize"]) > gib
    assert _size(conf["MaxScanSize"]) > 2 * gib  # 1 GiB archive + 1 GiB extracted
    assert int(conf["MaxFiles"]) >= 1000
    assert int(conf["MaxRecursion"]) >= 3
    assert conf["StreamMaxLength"] == "@STREAM_MAX@"
    script = (REPO / "scripts" / "clamd.sh").read_text()
    default = re.search(r'STREAM_MAX="\$\{AIRLOCK_CLAMD_STREAM_MAX:-(\w+)\}"', script)
    assert default and _size(default.group(1)) > gib
    hdb = (REPO / "scripts" / "clamd" / "airlock-test.hdb").read_text().split()
    assert "44d88612fea8a8f36de82e1278abb02f:68:Eicar-Test-Signature" in hdb
    assert "aa15bcf478d165efd2065190eb473bcb:544:ClamAV-Test-File" in hdb
