"""Video and audio: header facts into metadata; a video's poster frame and thumbnail; the served copy.

The sandbox job copies the audio and video streams into a new file without any of the
container's metadata (processing/sandbox/remux.py): that copy, `sanitized`, is what
`download` serves; the original, which may carry where it was filmed, never is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attachments import renditions
from processing.errors import ContentRejected
from processing.renditions import web_rendition_needed
from processing.sniff import detect_type

from .base import Derivative, SandboxStep, StepInput, StepResult

# The facts the job reads from the headers, copied into the row's metadata as they are.
FACTS = (
    "container",
    "duration_seconds",
    "width",
    "height",
    "rotation",
    "video_codec",
    "video_profile",
    "frame_rate",
    "audio_codec",
    "audio_channels",
    "audio_sample_rate",
    "bit_rate",
    "stream_count",
)
# What the served copy may be, read from its own first bytes (not the job's word).
SERVED_EXT = {
    "video/mp4": "mp4",
    "video/quicktime": "mov",
    "video/webm": "webm",
    "video/x-matroska": "mkv",
    "audio/mp4": "m4a",
    "audio/mpeg": "mp3",
    "audio/ogg": "ogg",
    "audio/x-wav": "wav",
}


class Media(SandboxStep):
    name = "media"
    processors = ("media",)
    serves_rendition = True

    def describe(self, data: dict[str, Any], files: dict[str, Path], given: StepInput) -> StepResult:
        result = StepResult(metadata={key: data.get(key) for key in FACTS})
        result.metadata["page_count"] = None
        result.files.append(self._served(files.get("served")))
        if result.metadata.get("video_codec") is not None:
            # Made after the file is ready (processing/transcode.py), only where the copy would not play.
            why = web_rendition_needed(result.metadata)
            result.metadata["renditions"] = {renditions.WEB: renditions.initial(needed=why is not None, why=why or "")}
        poster = files.get("poster")
        if poster is not None:
            found = data.get("poster")
            dims: dict[str, Any] = found if isinstance(found, dict) else {}
            width, height = dims.get("width"), dims.get("height")
            result.files.append(
                Derivative(
                    "poster",
                    poster,
                    "image/webp",
                    "webp",
                    width=width if isinstance(width, int) else None,
                    height=height if isinstance(height, int) else None,
                )
            )
            # The resource reads it from the row, as it does the thumbnail's.
            result.metadata["poster"] = {"width": width, "height": height}
        return result

    def _served(self, path: Path | None) -> Derivative:
        if path is None:  # the job always makes one, or rejects the file
            raise ContentRejected("corrupt", "no copy of the file to serve")
        with open(path, "rb") as fh:
            content_type = detect_type(fh.read(4100))
        if content_type not in SERVED_EXT:
            raise ContentRejected("corrupt", f"the served copy is not a media file ({content_type or 'unknown'})")
        # Size and SHA-256 are left to the pipeline, which measures the file itself.
        return Derivative("sanitized", path, content_type, SERVED_EXT[content_type], served=True)
