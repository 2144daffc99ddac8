"""Images: bounded decode, thumbnail and a metadata-free copy that is served instead.

HEIC/HEIF/AVIF come back with a full-resolution re-encoded copy (JPEG; WebP or PNG with
alpha) as their `sanitized` derivative: it is what `download` serves, and its type (read
here from its own first bytes, not from the job's word) becomes the attachment's. Their
`display` rendition (the same, long edge at most 2048 px) is for browsers, not served.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from processing.errors import ContentRejected
from processing.sniff import detect_type

from .base import Derivative, SandboxStep, StepInput, StepResult

_EXT = {"image/jpeg": "jpg", "image/png": "png", "image/gif": "gif", "image/webp": "webp"}
_RENDITION_TYPES = ("image/jpeg", "image/webp", "image/png")


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
        full = files.get("full")
        if full is not None:
            made = self._rendition("sanitized", full, data.get("full"), served=True)
            result.files.append(made)
            # What variants are made from (attachments/variants/spec.py, source_size).
            result.metadata["full"] = {"width": made.width, "height": made.height}
        display = files.get("display")
        if display is not None:
            made = self._rendition("display", display, data.get("display"), served=False)
            result.files.append(made)
            # The resource reads it from the row, as it does the thumbnail's.
            result.metadata["display"] = {"width": made.width, "height": made.height}
        return result

    def _rendition(self, kind: str, path: Path, facts: Any, *, served: bool) -> Derivative:
        with open(path, "rb") as fh:
            content_type = detect_type(fh.read(64))
        if content_type not in _RENDITION_TYPES:
            raise ContentRejected("corrupt", f"the {kind} rendition is not a JPEG, WebP or PNG image")
        facts = facts if isinstance(facts, dict) else {}
        width, height = facts.get("width"), facts.get("height")
        return Derivative(
            kind,
            path,
            content_type,
            _EXT[content_type],
            width=width if isinstance(width, int) else None,
            height=height if isinstance(height, int) else None,
            served=served,
            size=facts.get("size"),
            sha256=facts.get("sha256"),
        )
