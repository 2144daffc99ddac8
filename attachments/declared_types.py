"""What an upload's declared type may refuse before its bytes are read.

Browsers and hosts often do not know a file's type: Chromium gives a `.HEIC` photo an
empty one, a host passes `application/octet-stream` on, a name says one thing and the type
another. The bytes decide (intake reads the type from them); the declared type is kept as
`declared_type`. So a claim is refused for its type only when the type is specific, the
profile does not allow it, and the file's name does not name a type the profile allows.
"""

from __future__ import annotations

from typing import Protocol

UNKNOWN_TYPES = frozenset({"", "application/octet-stream"})

# Extensions of the types profiles take: a name that says one of these is taken at its word
# only to let a claim through, never to choose how the file is processed.
BY_EXTENSION = {
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "jpe": "image/jpeg",
    "png": "image/png",
    "gif": "image/gif",
    "webp": "image/webp",
    "heic": "image/heic",
    "heif": "image/heif",
    "hif": "image/heif",
    "avif": "image/avif",
    "mp4": "video/mp4",
    "m4v": "video/mp4",
    "mov": "video/quicktime",
    "qt": "video/quicktime",
    "webm": "video/webm",
    "m4a": "audio/mp4",
    "mp3": "audio/mpeg",
    "ogg": "audio/ogg",
    "oga": "audio/ogg",
    "opus": "audio/ogg",
    "wav": "audio/x-wav",
    "pdf": "application/pdf",
    "zip": "application/zip",
}


class _Allows(Protocol):
    def allows(self, content_type: str | None) -> bool: ...


def type_from_name(filename: str) -> str | None:
    """The type a file name's extension names, among the types profiles take."""
    stem, dot, ext = filename.rpartition(".")
    return BY_EXTENSION.get(ext.lower()) if dot and stem else None


def declared_type_refused(profile: _Allows, *, content_type: str, filename: str) -> bool:
    """True when the declared type alone is reason to refuse the claim (see the module's rule)."""
    if content_type in UNKNOWN_TYPES or profile.allows(content_type):
        return False
    return not profile.allows(type_from_name(filename))


def stored_type(content_type: str) -> str:
    """The Content-Type an upload is sent and stored with: the declared one, or the generic one when none was."""
    return content_type or "application/octet-stream"
