"""Storage keys are minted by the server; nothing of the filename reaches them.

The key layout is defined here only: the functions below build keys and
`parse_key` is the one place that reads them back.

    tenants/<slug>/<profile>/<attachment id>            the uploaded original
    tenants/<slug>/derivatives/<attachment id>/<name>    what processing wrote
    quarantine/<either of the above>                     a rejected file kept aside
"""

from __future__ import annotations

import unicodedata
import uuid
from dataclasses import dataclass

TENANTS_PREFIX = "tenants/"
QUARANTINE_PREFIX = "quarantine/"
_DERIVATIVES = "derivatives"


@dataclass(frozen=True)
class ParsedKey:
    tenant_slug: str
    attachment_id: uuid.UUID
    derivative: str = ""  # "<kind>.<ext>" for a derivative, "" for an original
    profile: str = ""  # originals only
    quarantined: bool = False


def parse_key(key: str) -> ParsedKey | None:
    """What a key minted here says (tenant, attachment, role), or None for a key of no known layout."""
    quarantined = key.startswith(QUARANTINE_PREFIX)
    parts = key.removeprefix(QUARANTINE_PREFIX).split("/")
    if len(parts) < 4 or parts[0] != TENANTS_PREFIX.rstrip("/") or not parts[1]:
        return None
    if len(parts) == 5 and parts[2] == _DERIVATIVES and parts[4]:
        raw_id, profile, derivative = parts[3], "", parts[4]
    elif len(parts) == 4 and parts[2]:
        raw_id, profile, derivative = parts[3], parts[2], ""
    else:
        return None
    attachment_id = _canonical_uuid(raw_id)
    if attachment_id is None:
        return None
    return ParsedKey(
        tenant_slug=parts[1],
        attachment_id=attachment_id,
        derivative=derivative,
        profile=profile,
        quarantined=quarantined,
    )


def _canonical_uuid(text: str) -> uuid.UUID | None:
    try:
        value = uuid.UUID(text)
    except ValueError:
        return None
    return value if str(value) == text else None


def original_key(*, tenant_slug: str, profile: str, attachment_id: uuid.UUID) -> str:
    return f"{TENANTS_PREFIX}{tenant_slug}/{profile}/{attachment_id}"


def derivative_key(*, tenant_slug: str, attachment_id: uuid.UUID, kind: str, ext: str) -> str:
    return f"{TENANTS_PREFIX}{tenant_slug}/{_DERIVATIVES}/{attachment_id}/{kind}.{ext}"


def quarantine_key(key: str) -> str:
    return f"{QUARANTINE_PREFIX}{key}"


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
