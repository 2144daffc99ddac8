"""Images: bounded decode, thumbnail and a metadata-free copy that is served instead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .base import Derivative, SandboxStep, StepInput, StepResult

_EXT = {"image/jpeg": "jpg", "image/png": "png", "image/gif": "gif", "image/webp": "webp"}


class Image(SandboxStep):
    name = "image"
    processors = ("image",)
    serves_rendition = True

    def decode(self, src: Any, work: Path, bounds: Any, tools: Any) -> tuple[dict[str, Any], dict[str, str]]:
        from processing.sandbox import images

        return images.process(src, work, bounds)

    def describe(self, data: dict[str, Any], files: dict[str, Path], given: StepInput) -> StepResult:
        result = StepResult(metadata={"width": data.get("width"), "height": data.get("height"), "page_count": None})
        sanitized = files.get("sanitized")
        if sanitized is not None:
            content_type = given.content_type or "application/octet-stream"
            result.files.append(Derivative("sanitized", sanitized, content_type, _EXT.get(content_type, "bin"),
                                           served=True, size=data.get("sanitized_size"),
                                           sha256=data.get("sanitized_sha256")))
        return result
