"""Named variants: which a profile has, their derivative kinds, the format an `Accept` gets, their ETag.

One source of truth for the names (AIRLOCK_VARIANTS) and the kind string
`variant:<name>:<format>` that the Derivative row, the claim and the storage key share.
"""

from __future__ import annotations

import hashlib

from django.conf import settings

FORMATS = {"webp": ("image/webp", "webp"), "jpeg": ("image/jpeg", "jpg")}  # format → (content type, ext)


def variant_sizes(profile: str, content_type: str | None) -> dict[str, int]:
    """name → long edge (px) of the variants a file of this profile and type has; empty when it has none.

    Variants are images: a file known not to be one (a camera profile's video) has none.
    """
    if content_type and not content_type.startswith("image/"):
        return {}
    return dict(settings.AIRLOCK_VARIANTS.get(profile, {}))


def negotiated_format(accept: str) -> str:
    """WebP when the client says it takes it, else JPEG (which every image client reads)."""
    for part in accept.split(","):
        media, *params = (piece.strip() for piece in part.split(";"))
        if media.lower() != "image/webp":
            continue
        quality = next((p[2:] for p in params if p.lower().startswith("q=")), "1")
        try:
            return "webp" if float(quality) > 0 else "jpeg"
        except ValueError:
            return "webp"
    return "jpeg"


def signed_name(name: str) -> str:
    """The rendition name a variant's signed link binds: a namespace of its own, so no variant is `download`."""
    return f"variant-{name}"


def variant_kind(name: str, fmt: str) -> str:
    return f"variant:{name}:{fmt}"


def page_kind(page: int) -> str:
    """A PDF page preview for the console (1-based page): made and stored as a variant is, never in the API."""
    return f"page:{page}:webp"


def variant_etag(*, sha256: str, name: str, fmt: str) -> str:
    """Stable for one original, variant and format: the same bytes are made again from the same input."""
    digest = hashlib.sha256(f"{sha256}:{name}:{fmt}".encode()).hexdigest()[:32]
    return f'"v1-{digest}"'


def etag_matches(header: str, etag: str) -> bool:
    """If-None-Match: `*`, or any listed tag, weak or strong (RFC 9110 weak comparison)."""
    if header.strip() == "*":
        return True
    return any(tag.strip().removeprefix("W/") == etag for tag in header.split(","))


def source_size(metadata: dict | None) -> tuple[int, int] | None:
    """Width and height of what variants are made from, what `download` serves.

    A HEIC's full-size copy (`full`), or, for one processed before it had one, its display
    rendition; else the image itself.
    """
    facts = metadata or {}
    served = facts.get("full") or facts.get("display")
    shown = served if isinstance(served, dict) else facts
    width, height = shown.get("width"), shown.get("height")
    return (width, height) if isinstance(width, int) and isinstance(height, int) and width and height else None


def variant_widths(profile: str, content_type: str | None, metadata: dict | None) -> dict[str, int]:
    """name → the width a variant will have, smallest first, for `srcset`'s `w` descriptors.

    Fit within the long edge, never upscaled: a variant as wide as a smaller one
    (a small original) is left out, it would add nothing to a `srcset`.
    """
    size = source_size(metadata)
    widths: dict[str, int] = {}
    for name, edge in sorted(variant_sizes(profile, content_type).items(), key=lambda item: item[1]):
        width = edge if size is None else round(size[0] * min(1.0, edge / max(size)))
        if width not in widths.values():
            widths[name] = width
    return widths
