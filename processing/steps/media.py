"""Video and audio: header facts into metadata; a video's poster frame and thumbnail."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .base import Derivative, SandboxStep, StepInput, StepResult

# The facts the job reads from the headers, copied into the row's metadata as they are.
FACTS = ("container", "duration_seconds", "width", "height", "rotation", "video_codec", "frame_rate",
         "audio_codec", "audio_channels", "audio_sample_rate", "bit_rate", "stream_count")


class Media(SandboxStep):
    name = "media"
    processors = ("media",)

    def decode(self, src: Any, work: Path, bounds: Any, tools: Any) -> tuple[dict[str, Any], dict[str, str]]:
        from processing.sandbox import media

        return media.process(src, work, bounds)

    def describe(self, data: dict[str, Any], files: dict[str, Path], given: StepInput) -> StepResult:
        result = StepResult(metadata={key: data.get(key) for key in FACTS})
        result.metadata["page_count"] = None
        poster = files.get("poster")
        if poster is not None:
            found = data.get("poster")
            dims: dict[str, Any] = found if isinstance(found, dict) else {}
            width, height = dims.get("width"), dims.get("height")
            result.files.append(Derivative("poster", poster, "image/webp", "webp",
                                           width=width if isinstance(width, int) else None,
                                           height=height if isinstance(height, int) else None))
            # The resource reads it from the row, as it does the thumbnail's.
            result.metadata["poster"] = {"width": width, "height": height}
        return result
