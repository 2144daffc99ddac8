"""Helpers shared by the sandbox tests (no Django: these tests never touch the database)."""

from __future__ import annotations

import os
from pathlib import Path

from processing.sandbox import SandboxResult


def corpus_dir() -> Path:
    override = os.environ.get("AIRLOCK_CORPUS_DIR")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[2].parent / "shared" / "corpus"


def outcome(result: SandboxResult) -> str:
    """The manifest's spelling: ready | rejected:<code>."""
    return "ready" if result.outcome == "ok" else f"rejected:{result.reason_code}"
