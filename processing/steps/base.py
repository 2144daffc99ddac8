"""The step contract: what a step is given, what it returns, and the two kinds of step."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from attachments.facts import FileFacts
from processing import sandbox_config  # run_sandboxed looked up per call: tests and benchmarks wrap it
from processing.errors import ContentRejected, TransientError
from processing.sandbox.solo import ResourcePressure, run_settled
from processing.stages import DERIVE


@dataclass(frozen=True)
class StepInput:
    """Everything a step may look at. Never the row, never the storage gateway."""

    profile: Any  # attachments.profiles.Profile: name, allowed_types, max_bytes, processor, for_type()
    size: int | None = None  # bytes in storage
    declared_size: int | None = None  # what the intent said it would send (intake compares)
    declared_sha256: str = ""  # hex; empty when the intent declared none
    content_type: str | None = None  # sniffed at intake; None before it
    head: bytes = b""  # the first bytes (intake)
    chunks: Callable[[], Iterable[bytes]] | None = None  # a fresh stream of the bytes per call
    path: Path | None = None  # a local file holding the bytes (scan, derive)
    work_dir: Path | None = None  # an empty directory a sandboxed step writes its files in


@dataclass(frozen=True)
class Derivative:
    """A file a step produced; the pipeline stores it under the attachment's key for `kind`."""

    kind: str
    path: Path
    content_type: str
    ext: str
    width: int | None = None
    height: int | None = None
    served: bool = False  # served in place of the original (size and sha256 describe it)
    size: int | None = None  # as the step measured it; the pipeline re-checks
    sha256: str | None = None


@dataclass
class StepResult:
    facts: FileFacts = field(default_factory=FileFacts)  # typed: the services map them onto the row
    metadata: dict[str, Any] = field(default_factory=dict)  # merged into the row's metadata
    files: list[Derivative] = field(default_factory=list)

    def merge(self, other: StepResult) -> StepResult:
        self.facts.merge(other.facts)
        self.metadata.update(other.metadata)
        self.files.extend(other.files)
        return self


class Step:
    """One step of a stage (processing/stages.py). Subclasses set `name` and `stage` and implement run()."""

    name: ClassVar[str]
    stage: ClassVar[str]

    def applies_to(self, profile: Any, content_type: str | None) -> bool:
        return True

    def run(self, given: StepInput) -> StepResult:
        raise NotImplementedError


class SandboxStep(Step):
    """A decoder: it sends the file to a confined sandbox job of kind `name`.

    The sandbox owns what that kind runs (processing/sandbox/kinds.py); run() sends
    the job and turns its data and files into a StepResult with describe().
    """

    stage = DERIVE.name
    processors: ClassVar[tuple[str, ...]] = ()  # the profiles' `processor` values it serves
    serves_rendition: ClassVar[bool] = False  # its output is served instead of the original
    bound_reason: ClassVar[str] = "too_large"  # a scanner's size/nesting bound, for this kind

    def applies_to(self, profile: Any, content_type: str | None) -> bool:
        # A profile with kinds names its processor per type (attachments/profiles.py).
        return profile.for_type(content_type).processor in self.processors

    def describe(self, data: dict[str, Any], files: dict[str, Path], given: StepInput) -> StepResult:
        raise NotImplementedError

    def rejected(self, reason_code: str | None, message: str) -> None:
        """A rejected job; a step that counts its own verdicts overrides this."""

    def run(self, given: StepInput) -> StepResult:
        path = given.path
        assert path is not None and given.work_dir is not None
        try:  # a resource limit rejects only when it trips again on a solo re-run
            outcome = run_settled(
                lambda work: sandbox_config.run_sandboxed(self.name, path, work),
                given.work_dir,
                wait_seconds=sandbox_config.limits_from_settings().wall_seconds,
            )
        except ResourcePressure as exc:
            raise TransientError(f"sandbox {self.name}: {exc}") from exc
        if outcome.outcome != "ok":
            self.rejected(outcome.reason_code, outcome.message)
            raise ContentRejected(outcome.reason_code or "corrupt", outcome.message or "could not be decoded")
        result = self.describe(outcome.data, {k: Path(v) for k, v in outcome.files.items()}, given)
        result.metadata.setdefault("thumbnail", None)  # the resource reads it instead of querying derivatives
        thumb = outcome.files.get("thumbnail")
        if thumb is not None:
            dims = outcome.data.get("thumbnail") or {}
            result.files.insert(
                0,
                Derivative(
                    "thumbnail", Path(thumb), "image/webp", "webp", width=dims.get("width"), height=dims.get("height")
                ),
            )
            result.metadata["thumbnail"] = {"width": dims.get("width"), "height": dims.get("height")}
        return result


def decoder_among(decoders: Iterable[SandboxStep], profile: Any, content_type: str | None) -> SandboxStep | None:
    """The sandboxed step that decodes this profile's files, if any."""
    return next((d for d in decoders if d.applies_to(profile, content_type)), None)
