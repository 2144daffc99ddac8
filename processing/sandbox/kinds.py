"""The sandbox's job kinds: the one table of what a job may be asked to decode.

The sandbox owns it: the worker's steps name a kind when they send a job, and the
fork server and its jobs import no step. Each decoder's module is imported on first
use: the fork server has them all loaded (warmup.preload) before it forks a job,
while the worker, which only checks a kind's name and limits here, never loads the
decoders' C libraries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .limits import Bounds

Decode = Callable[[Any, Path, Bounds, Any], tuple[dict[str, Any], dict[str, str]]]


@dataclass(frozen=True)
class JobKind:
    decode: Decode  # (open input, work dir, bounds, tools) -> (data, files); runs inside the job
    # Its output holds a copy of the input (a remux): the job may write about the input's size.
    copies_input: bool = False


def _image(src: Any, work: Path, bounds: Bounds, tools: Any) -> tuple[dict[str, Any], dict[str, str]]:
    from . import images  # Pillow and its plugins: loaded in the fork server, never in the worker

    return images.process(src, work, bounds)


def _variant(src: Any, work: Path, bounds: Bounds, tools: Any) -> tuple[dict[str, Any], dict[str, str]]:
    from . import images, pdfs

    if bounds.variant_page:  # a page of a document, for the console (attachments/variants/services/obtain.py)
        return pdfs.page_variant(src, work, bounds, isolate=tools.isolate)
    return images.variant(src, work, bounds)


def _pdf(src: Any, work: Path, bounds: Bounds, tools: Any) -> tuple[dict[str, Any], dict[str, str]]:
    from . import pdfs  # pypdf

    return pdfs.process(src, work, bounds, isolate=tools.isolate)


def _zip(src: Any, work: Path, bounds: Bounds, tools: Any) -> tuple[dict[str, Any], dict[str, str]]:
    from . import archives

    return archives.process(src, work, bounds, scan=tools.member_scanner())


def _media(src: Any, work: Path, bounds: Bounds, tools: Any) -> tuple[dict[str, Any], dict[str, str]]:
    from . import media  # PyAV (FFmpeg)

    return media.process(src, work, bounds)


def _transcode(src: Any, work: Path, bounds: Bounds, tools: Any) -> tuple[dict[str, Any], dict[str, str]]:
    from . import transcode  # PyAV (FFmpeg, libx264)

    return transcode.process(src, work, bounds)


KINDS: dict[str, JobKind] = {
    "image": JobKind(_image),
    "pdf": JobKind(_pdf),
    "zip": JobKind(_zip),
    "media": JobKind(_media, copies_input=True),
    "transcode": JobKind(_transcode),  # a video's web rendition (H.264 + AAC in MP4), after it is ready
    "variant": JobKind(_variant),  # a named variant of a served image, or a PDF page for the console
}
