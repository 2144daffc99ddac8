"""More of a file on its change page: a PDF's first pages and an archive's listing.

Both come from what processing already did: the page images are made on first view
by the sandbox's `variant` job (a PDF page instead of an image's rendition) and
stored as derivatives; the listing is the names and sizes the archive step recorded
in `metadata`. Nothing here opens the file in the web process.
"""

from __future__ import annotations

from typing import Any

from django.template.defaultfilters import filesizeformat
from django.urls import reverse

from ..models import Attachment
from ..variants.services import obtain as variants
from .views import staff_served_of


def page_urls(attachment: Attachment) -> list[tuple[int, str]]:
    """(page number, preview URL) for the first pages of a PDF staff may see; empty for anything else."""
    pages = (attachment.metadata or {}).get("page_count")
    if attachment.content_type != "application/pdf" or not isinstance(pages, int) or pages < 1:
        return []
    if staff_served_of(attachment) is None:
        return []
    shown = min(pages, variants.CONSOLE_PDF_PAGES)
    return [(n, reverse("admin:attachments_attachment_page", args=[attachment.pk, n])) for n in range(1, shown + 1)]


def archive_listing(metadata: dict[str, Any] | None) -> dict[str, Any] | None:
    """The recorded top-level entries as rows a template prints (names escaped there), or None."""
    if not metadata or "entries" not in metadata:
        return None
    listing = metadata.get("listing") or []
    rows = [
        {"name": str(name), "size": filesizeformat(size) if isinstance(size, int) else "—"}
        for name, size in (entry for entry in listing if isinstance(entry, list) and len(entry) == 2)
    ]
    entries = metadata.get("entries")
    return {
        "rows": rows,
        "entries": entries,
        "total": filesizeformat(metadata.get("total_bytes") or 0),
        "more": entries - len(rows) if isinstance(entries, int) and entries > len(rows) else 0,
        "recorded": "listing" in metadata,
    }
