"""Fault-injection tests: a service a test is marked for must be there (they FAIL, never skip)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sweeper.support import require_live_services


@pytest.fixture(autouse=True)
def _require_marked_services(request: pytest.FixtureRequest) -> None:
    require_live_services(request)
    if request.node.get_closest_marker("clamd"):
        if not (shutil.which("clamd") or Path("/usr/sbin/clamd").exists()):
            pytest.fail("marked clamd but clamd is not installed (scripts/clamd.sh install)")


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A short directory for unix sockets (sun_path is limited to ~107 bytes)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="alk-f-", dir="/tmp") as path:
        yield Path(path)
