"""Images: bounded decode, thumbnail and a metadata-free copy that is served instead.

HEIC/HEIF/AVIF come back with a `display` rendition (JPEG, or WebP with alpha) instead
of a sanitized copy of the original: it is what `download` serves, and its type (read
here from its own first bytes, not from the job's word) becomes the attachment's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from processing.errors import ContentRejected
from processing.sniff import detect_type

from .base import Derivative, SandboxStep, StepInput, StepResult

_EXT = {"image/jpeg": "jpg", "image/png": "png", "image/gif": "gif", "image/webp": "webp"}
_DISPLAY_TYPES = ("image/jpeg", "image/webp")


class Image(SandboxStep):
    name = "image"
    processors = ("image",)
    serves_rendition = True

    def describe(self, data: dict[str, Any], files: dict[str, Path], given: StepInput) -> StepResult:
        result = StepResult(metadata={"width": data.get("width"), "height": data.get("height"), "page_count": None})
        sanitized = files.get("sanitized")
        if sanitized is not None:
            content_type = given.content_type or "application/octet-stream"
            result.files.append(
                Derivative(
                    "sanitized",
                    sanitized,
                    content_type,
                    _EXT.get(content_type, "bin"),
                    served=True,
                    size=data.get("sanitized_size"),
                    sha256=data.get("sanitized_sha256"),
                )
            )
        display = files.get("display")
        if display is not None:
            made = self._display(display, data.get("display"))
            result.files.append(made)
            # The resource reads it from the row, as it does the thumbnail's.
            result.metadata["display"] = {"width": made.width, "height": made.height}
        return result

    def _display(self, path: Path, facts: Any) -> Derivative:
        with open(path, "rb") as fh:
            content_type = detect_type(fh.read(64))
        if content_type not in _DISPLAY_TYPES:
            raise ContentRejected("corrupt", "the display rendition is not a JPEG or WebP image")
        facts = facts if isinstance(facts, dict) else {}
        width, height = facts.get("width"), facts.get("height")
        return Derivative(
            "display",
            path,
            content_type,
            _EXT[content_type],
            width=width if isinstance(width, int) else None,
            height=height if isinstance(height, int) else None,
            served=True,
            size=facts.get("size"),
            sha256=facts.get("sha256"),
        )
