"""Fixtures for the sandbox tests: corpus location and a run_job wrapper with fresh work dirs."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from processing.sandbox import Bounds, Limits, SandboxResult, run_job, shutdown


@pytest.fixture(scope="session", autouse=True)
def _stop_fork_server() -> Any:
    yield
    shutdown()


@pytest.fixture
def run(tmp_path: Path) -> Callable[..., SandboxResult]:
    """run(kind, path_or_bytes, **kwargs) with a fresh work dir per call."""
    counter = itertools.count()

    def _run(
        kind: str,
        source: Path | bytes,
        *,
        limits: Limits = Limits(),  # noqa: B008 - frozen dataclass
        bounds: Bounds = Bounds(),  # noqa: B008
        name: str = "input",
        member_rules: Path | None = None,
    ) -> SandboxResult:
        n = next(counter)
        if isinstance(source, bytes):
            path = tmp_path / f"{n}-{name}"
            path.write_bytes(source)
            source = path
        return run_job(
            kind,
            source,
            tmp_path / f"work-{n}",
            limits=limits,
            bounds=bounds,
            member_rules=member_rules,
        )

    return _run
