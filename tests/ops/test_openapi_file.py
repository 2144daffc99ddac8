"""docs/openapi.yaml is the document the code generates: a change to the API regenerates it (scripts/openapi)."""

from __future__ import annotations

import difflib
from pathlib import Path

import yaml
from django.core.management import call_command

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "openapi.yaml"


def _generated(tmp_path: Path) -> str:
    # The same command scripts/openapi runs, so the comparison is byte for byte.
    out = tmp_path / "openapi.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    return out.read_text(encoding="utf-8")


def test_committed_openapi_file_is_what_the_code_generates(tmp_path):
    generated = _generated(tmp_path)
    committed = COMMITTED.read_text(encoding="utf-8")
    diff = "".join(
        difflib.unified_diff(
            committed.splitlines(True), generated.splitlines(True), "docs/openapi.yaml (committed)", "generated", n=1
        )
    )
    assert not diff, f"docs/openapi.yaml is out of date; run scripts/openapi and commit it:\n{diff[:4000]}"


def test_committed_openapi_file_is_the_served_schema(client):
    # The file is the schema /api/v1/schema serves, not a look-alike.
    served = client.get("/api/v1/schema", {"format": "json"}).json()
    assert yaml.safe_load(COMMITTED.read_text(encoding="utf-8")) == served
    assert "/api/v1/uploads" in served["paths"]
