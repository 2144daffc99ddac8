"""A video's `web` rendition: its state, kept in the row's metadata, and what the resource shows of it.

The state lives in `metadata["renditions"]["web"]`, on the row every read already
loads: the resource shows it with no query of its own. The decision (needed or
not) is the media step's (processing/renditions.py); the transcode itself runs
after the file is ready, on the `transcode` queue (processing/transcode.py), and
records its progress and outcome through attachments/services/renditions.py.

    status      pending | ready | failed | not_needed
    progress    0.0 – 1.0 while pending (null when nothing is to be made)
    codec, width, height, bytes   of the rendition once ready
    attempts, claim, claimed_until, queued_at, error   bookkeeping, never shown
"""

from __future__ import annotations

from typing import Any

WEB = "web"
PENDING, READY, FAILED, NOT_NEEDED = "pending", "ready", "failed", "not_needed"
SHOWN = ("status", "progress", "codec", "width", "height", "bytes")
# The Derivative kind (one row per attachment and kind) and the signed link's name.
DERIVATIVE_KIND = WEB


def web_state(metadata: dict[str, Any] | None) -> dict[str, Any] | None:
    """The row's web rendition state, or None (not a video, or processed before renditions existed)."""
    renditions = (metadata or {}).get("renditions")
    state = renditions.get(WEB) if isinstance(renditions, dict) else None
    return state if isinstance(state, dict) else None


def shown(metadata: dict[str, Any] | None) -> dict[str, Any] | None:
    """`renditions` as the resource shows it: each rendition's public fields only."""
    state = web_state(metadata)
    if state is None:
        return None
    return {WEB: {name: state.get(name) for name in SHOWN}}


def initial(*, needed: bool, why: str = "") -> dict[str, Any]:
    """The state the media step records: pending (to be made once the file is ready) or not needed."""
    state: dict[str, Any] = {name: None for name in SHOWN}
    state["status"] = PENDING if needed else NOT_NEEDED
    if needed:
        state.update(progress=0.0, attempts=0, why=why)
    return state
