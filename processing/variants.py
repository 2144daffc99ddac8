"""Make one named variant in the sandbox: the renderer attachments/variants/services/obtain.py calls through hooks."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from attachments.hooks import RenderedVariant, RenderFailed, RenderUnavailable

from . import sandbox_config
from .errors import TransientError

KIND = "variant"


def render_variant(source: Path, work_dir: Path, size: int, fmt: str, page: int = 0) -> RenderedVariant:
    """Run the `variant` sandbox job (derive's limits and bounds) on `source`; the file it made.

    `page` (1-based) renders that page of a PDF instead (the console's page previews).
    """
    bounds = replace(sandbox_config.bounds_from_settings(), variant_size=size, variant_format=fmt, variant_page=page)
    try:
        result = sandbox_config.run_sandboxed(KIND, source, work_dir, bounds=bounds)
    except TransientError as exc:
        raise RenderUnavailable(str(exc)) from exc
    except FileNotFoundError as exc:
        # The stored file itself (local storage) was removed since it was looked up: as a
        # failed download was, an outage for this request, not a verdict on the file.
        raise RenderUnavailable(f"the source is gone: {exc}") from exc
    made = result.files.get("variant")
    if result.outcome != "ok" or made is None:
        raise RenderFailed(f"{result.reason_code or 'corrupt'}: {result.message or 'no variant made'}")
    width, height = result.data.get("width"), result.data.get("height")
    return RenderedVariant(
        path=Path(made),
        content_type="image/jpeg" if fmt == "jpeg" else "image/webp",
        width=width if isinstance(width, int) else None,
        height=height if isinstance(height, int) else None,
    )
