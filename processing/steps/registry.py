"""The one table of steps. The pipeline runs a stage's applicable steps in this order.

The decoders send their files to the sandbox's job kinds of the same names
(processing/sandbox/kinds.py: the sandbox owns that table and imports no step).
"""

from __future__ import annotations

from typing import Any

from .archive import Zip
from .base import SandboxStep, Step, decoder_among
from .digest import Digest
from .image import Image
from .intake import Intake
from .media import Media
from .pdf import Pdf
from .scan import Scan

DECODERS: tuple[SandboxStep, ...] = (Image(), Pdf(), Zip(), Media())

STEPS: tuple[Step, ...] = (Intake(), Scan(DECODERS), Digest(DECODERS), *DECODERS)


def steps_for(stage: str, profile: Any, content_type: str | None) -> list[Step]:
    return [s for s in STEPS if s.stage == stage and s.applies_to(profile, content_type)]


def decoder_for(profile: Any, content_type: str | None) -> SandboxStep | None:
    """The sandboxed step that decodes this profile's files, if any."""
    return decoder_among(DECODERS, profile, content_type)
