"""Named variants (small/medium/large): made on first request, in the sandbox, from the served rendition.

Never part of the pipeline (no profile's processor names it): the web request that
finds a variant missing runs it through processing/variants.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .base import SandboxStep


class Variant(SandboxStep):
    name = "variant"
    processors = ()  # applies to no profile: only asked for by name

    def decode(self, src: Any, work: Path, bounds: Any, tools: Any) -> tuple[dict[str, Any], dict[str, str]]:
        from processing.sandbox import images, pdfs

        if bounds.variant_page:  # a page of a document, for the console (attachments/services/variants.py)
            return pdfs.page_variant(src, work, bounds, isolate=tools.isolate)
        return images.variant(src, work, bounds)
