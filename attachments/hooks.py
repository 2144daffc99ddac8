"""Where other apps hear about attachments, and the sandbox the web process renders variants in.

Dependencies point toward attachments: an app that wants to react (webhooks)
connects from its AppConfig.ready(); attachments never imports it.

- `announce(outcome, ids)` is called by the audit points of services/transitions.py in
  the same transaction as the change, and sends `outcome_reached` (a Django signal), so a
  receiver's writes (an event row, an outbox job) commit or roll back with it. A receiver
  that raises aborts the change.
- `variant_renderer()` makes a named variant in the sandbox: processing registers it
  (the web process never decodes an image itself, and attachments never imports processing).
- `variant_slot(tenant, job)` holds one of the tenant's fair-share slots while a variant is
  made, or raises `SlotsFull`: processing registers it (the pipeline's pools, fairness.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from django.dispatch import Signal

# What receivers hear. Status outcomes come from transitions, lifecycle ones from the
# lifecycle audit: "deleted" is a sweep (expired or discarded, then reaped), an
# abandoned sweep dead letter, or a moderator's take-down.
# "rendition_ready": a ready video's web rendition was made (attachments/services/renditions.py).
# "approved"/"declined": a host decided on a guest's file (attachments/links/services/approval.py).
OUTCOMES = ("ready", "rejected", "failed", "deleted", "committed", "rendition_ready", "approved", "declined")


@dataclass(frozen=True)
class RenderedVariant:
    path: Path  # in the caller's work dir
    content_type: str
    width: int | None
    height: int | None


class RenderFailed(Exception):
    """The sandbox refused to make the variant (a content outcome: not retried at once)."""


class RenderUnavailable(Exception):
    """The sandbox could not run (infrastructure: retry soon)."""


class SlotsFull(Exception):
    """Every slot of the tenant's fair share is in use: a web request is refused, it never waits for one."""


# (tenant id, the job's name) -> held for the work; raises SlotsFull on entry when none is free.
VariantSlot = Callable[[str, str], AbstractContextManager[None]]


class VariantRenderer(Protocol):
    """(source file, work dir, long edge, "webp"|"jpeg", PDF page or 0) -> the file made."""

    def __call__(self, source: Path, work_dir: Path, size: int, fmt: str, page: int = 0) -> RenderedVariant: ...


_variant_renderer: list[VariantRenderer] = []
_variant_slot: list[VariantSlot] = []

# Sent with outcome= and ids= (the attachments' primary keys), inside the change's transaction.
outcome_reached = Signal()


def register_variant_renderer(renderer: VariantRenderer) -> None:
    _variant_renderer[:] = [renderer]


def variant_renderer() -> VariantRenderer:
    if not _variant_renderer:
        raise RenderUnavailable("no variant renderer registered (the processing app is not installed)")
    return _variant_renderer[0]


def register_variant_slot(slot: VariantSlot) -> None:
    _variant_slot[:] = [slot]


def variant_slot(tenant: str, job: str) -> AbstractContextManager[None]:
    """A slot of `tenant`'s fair share for one variant; no limit when processing is not installed."""
    return _variant_slot[0](tenant, job) if _variant_slot else nullcontext()


def announce(outcome: str, ids: Sequence[Any]) -> None:
    """Tell every receiver that these attachments reached `outcome` (inside the caller's transaction)."""
    if outcome not in OUTCOMES:
        raise ValueError(f"unknown outcome {outcome!r}")
    if ids:
        outcome_reached.send(sender=None, outcome=outcome, ids=ids)


def outcome_of_transition(name: str, to_status: str) -> str | None:
    if name == "take_down":
        return "deleted"
    return to_status if to_status in ("ready", "rejected", "failed") else None


def outcome_of_lifecycle(event: str, to: str) -> str | None:
    if event == "commit":
        return "committed"
    return "deleted" if to == "deleted" else None
