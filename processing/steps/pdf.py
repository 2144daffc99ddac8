"""PDFs: page count, text (for search) and a page-1 thumbnail."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings

from .base import SandboxStep, StepInput, StepResult


class Pdf(SandboxStep):
    name = "pdf"
    processors = ("pdf",)

    def describe(self, data: dict[str, Any], files: dict[str, Path], given: StepInput) -> StepResult:
        result = StepResult(metadata={"width": None, "height": None, "page_count": data.get("page_count")})
        text_path = files.get("text")
        if text_path is not None:
            text = text_path.read_text("utf-8", errors="replace")[: settings.AIRLOCK_DECODE_LIMITS.text_chars]
            result.facts.text = text.replace("\x00", "")
        return result
