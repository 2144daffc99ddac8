"""Storage keys are minted by the server; nothing of the filename reaches them."""

from __future__ import annotations

import unicodedata
import uuid


def original_key(*, tenant_slug: str, profile: str, attachment_id: uuid.UUID) -> str:
    return f"tenants/{tenant_slug}/{profile}/{attachment_id}"


def derivative_key(*, tenant_slug: str, attachment_id: uuid.UUID, kind: str, ext: str) -> str:
    return f"tenants/{tenant_slug}/derivatives/{attachment_id}/{kind}.{ext}"


def derivative_prefix(*, tenant_slug: str, attachment_id: uuid.UUID) -> str:
    return f"tenants/{tenant_slug}/derivatives/{attachment_id}/"


def quarantine_key(key: str) -> str:
    return f"quarantine/{key}"


def clean_filename(raw: str) -> str:
    """Keep what a person typed, minus what can hurt a header or a path.

    Control and format characters go, path separators become "_". HTML is kept
    as text: every place that shows a filename escapes it.
    """
    text = unicodedata.normalize("NFC", raw)
    kept = []
    for ch in text:
        category = unicodedata.category(ch)
        if category in ("Cc", "Cf", "Cs", "Co", "Zl", "Zp"):
            continue
        kept.append("_" if ch in "/\\" else ch)
    name = "".join(kept).strip().strip(".") or "file"
    return name[:255]
