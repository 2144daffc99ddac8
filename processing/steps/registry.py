"""The one table of steps. The pipeline runs a stage's applicable steps in this order;
the sandbox runs the decoding steps as its job kinds."""

from __future__ import annotations

from typing import Any

from .archive import Zip
from .base import SandboxStep, Step
from .digest import Digest
from .image import Image
from .intake import Intake
from .media import Media
from .pdf import Pdf
from .scan import Scan
from .variant import Variant

STEPS: tuple[Step, ...] = (Intake(), Scan(), Digest(), Image(), Pdf(), Zip(), Media(), Variant())

SANDBOX_KINDS: dict[str, SandboxStep] = {s.name: s for s in STEPS if isinstance(s, SandboxStep)}


def steps_for(stage: str, profile: Any, content_type: str | None) -> list[Step]:
    return [s for s in STEPS if s.stage == stage and s.applies_to(profile, content_type)]


def decoder_for(profile: Any, content_type: str | None) -> SandboxStep | None:
    """The sandboxed step that decodes this profile's files, if any."""
    return next((s for s in SANDBOX_KINDS.values() if s.applies_to(profile, content_type)), None)
