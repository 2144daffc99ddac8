"""The JSON shapes the API answers with (docs/api.md, docs/openapi.yaml), as TypedDicts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypedDict

Status = Literal["pending", "processing", "ready", "rejected", "failed"]
TERMINAL: frozenset[str] = frozenset({"ready", "rejected", "failed"})

ProgressCallback = Callable[[int, int], None]
"""Called as bytes go out: `(bytes_sent_so_far, total_bytes)`."""


Approval = Literal["not_required", "pending", "approved", "declined"]


class Reason(TypedDict):
    code: str
    message: str


class Attachment(TypedDict, total=False):
    id: str
    subject: str
    """The host's id for the person the file is for (`Airlock-Subject`), or the owner's username."""
    profile: str
    status: Status
    available: bool
    """True exactly when the file can be downloaded now (ready, and not discarded, released or expired)."""
    reason: Reason | None
    filename: str
    size: int | None
    content_type: str | None
    sha256: str | None
    created_at: str
    ready_at: str | None
    expires_at: str | None
    committed: bool
    lifecycle: str
    ref: str | None
    approval: Approval
    """For a file sent through an upload link that requires approval: `pending` until approved or declined."""
    derivatives: dict[str, Any]
    metadata: dict[str, Any]
    links: dict[str, Any]
    renditions: dict[str, Any]


class Usage(TypedDict):
    bytes_used: int
    bytes_limit: int | None
    files_used: int
    files_limit: int | None


class HeartbeatEntry(TypedDict):
    id: str
    expires_at: str | None


class Heartbeat(TypedDict):
    attachments: list[HeartbeatEntry]
    missing: list[str]


class Commit(TypedDict):
    committed: list[str]
    ref: str


class ClientToken(TypedDict):
    id: str
    token: str
    subject: str
    expires_at: str


class Logout(TypedDict):
    revoked: int
    discarded: int


class UploadLink(TypedDict, total=False):
    id: str
    url: str
    """The page guests open (and the QR code's content): Airlock's mobile upload page, no login."""
    qr_svg_url: str
    qr_png_url: str
    ref: str
    title: str
    profiles: list[str]
    requires_approval: bool
    max_files_per_guest: int | None
    max_bytes_per_guest: int | None
    max_files: int | None
    files_used: int
    state: Literal["open", "expired", "disabled"]
    created_at: str
    expires_at: str
    disabled_at: str | None


class ArchiveLink(TypedDict):
    url: str
    """A ZIP of the ref's available files, signed: opens without `Authorization` until `expires_at`."""
    expires_at: str
