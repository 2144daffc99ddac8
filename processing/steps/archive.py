"""ZIP archives: inspected, never extracted; members scanned with YARA inside the job."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from processing.metrics import record_member_scan

from .base import SandboxStep, StepInput, StepResult


class Zip(SandboxStep):
    name = "zip"
    processors = ("zip",)
    bound_reason = "archive_limit"

    def describe(self, data: dict[str, Any], files: dict[str, Path], given: StepInput) -> StepResult:
        if data.get("scanned_entries"):
            record_member_scan("clean")
        metadata = {
            "entries": data.get("entries"),
            "total_bytes": data.get("total_bytes"),
            "nested_archives": data.get("nested_archives"),
            # Names and sizes for the console, recorded now: the admin never opens the archive.
            "listing": data.get("listing") or [],
        }
        if data.get("uninspectable_entries"):  # only with AIRLOCK_ZIP_ALLOW_UNINSPECTABLE: never scanned
            metadata["unscanned_entries"] = data["uninspectable_entries"]
        return StepResult(metadata=metadata)

    def rejected(self, reason_code: str | None, message: str) -> None:
        if reason_code == "malware":  # only the member scan finds malware in this job
            record_member_scan("infected")
