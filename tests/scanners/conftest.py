"""Fixtures for the scanner tests: no Django, no database.

clamd tests are marked ``clamd`` and FAIL (never skip) when clamd does not
answer: CI starts it with ``scripts/clamd.sh start``. The address comes from
CLAMD_SOCKET, or CLAMD_HOST/CLAMD_PORT, defaulting to the socket that
script creates.
"""

from __future__ import annotations

import socket
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:  # so plain `pytest` works too, not only `python -m pytest`
    sys.path.insert(0, str(_REPO))

from processing.scanners import ClamdScanner  # noqa: E402

from .support import FakeClamd, clamd_from_env  # noqa: E402


@pytest.fixture(scope="session")
def clamd() -> ClamdScanner:
    scanner = clamd_from_env()
    try:
        scanner.ping()
    except Exception as exc:  # fail, not skip: a missing clamd must turn CI red
        pytest.fail(f"clamd not reachable at {scanner.address} (run scripts/clamd.sh start): {exc}")
    return scanner


@pytest.fixture
def short_sock_dir() -> Iterator[Path]:
    """A short directory for unix sockets (sun_path is limited to ~107 bytes)."""
    with tempfile.TemporaryDirectory(prefix="alk-", dir="/tmp") as d:
        yield Path(d)


@pytest.fixture
def fake_clamd(short_sock_dir: Path) -> Iterator[Callable[..., FakeClamd]]:
    fakes: list[FakeClamd] = []

    def start(handler: Callable[[FakeClamd, socket.socket], None]) -> FakeClamd:
        fake = FakeClamd(short_sock_dir / f"fake{len(fakes)}.sock", handler)
        fakes.append(fake)
        return fake

    yield start
    for fake in fakes:
        fake.close()


# tests/conftest.py has autouse fixtures for the Django app (per-test storage
# root, cache clearing). Scanner tests use neither, and must run without Django
# settings, a cache backend or a database, so those are replaced here by no-ops
# (a fixture of the same name in a nearer conftest overrides the outer one).
@pytest.fixture(autouse=True)
def storage_root() -> None:
    return None


@pytest.fixture(autouse=True)
def _clear_cache() -> None:
    return None
