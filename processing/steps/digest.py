"""Digest: describe the original when it is what gets served (no decoder serves a rendition)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from attachments.facts import FileFacts
from processing.stages import DERIVE

from .base import SandboxStep, Step, StepInput, StepResult, decoder_among


def sha256_file(path: Path) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            size += len(chunk)
            digest.update(chunk)
    return size, digest.hexdigest()


class Digest(Step):
    name = "digest"
    stage = DERIVE.name

    def __init__(self, decoders: Iterable[SandboxStep]) -> None:
        self.decoders = tuple(decoders)

    def applies_to(self, profile, content_type):
        decoder = decoder_among(self.decoders, profile, content_type)
        return decoder is None or not decoder.serves_rendition

    def run(self, given: StepInput) -> StepResult:
        assert given.path is not None
        size, sha256 = sha256_file(given.path)
        return StepResult(facts=FileFacts(size=size, sha256=sha256))
