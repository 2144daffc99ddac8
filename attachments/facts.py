"""What the pipeline found out about a file, as the services record it: one typed field per fact.

The steps (processing/steps/) return these, never column names; the services
(attachments/services/processing.py, facts_columns) say which column each fact
goes to. A fact left None was not found by the steps that ran: it sets nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any


@dataclass
class FileFacts:
    stored_size: int | None = None  # intake: the bytes in storage
    content_type: str | None = None  # intake: sniffed from the first bytes; derive: the served rendition's
    scan_signatures: str | None = None  # scan: the signature versions that found it clean
    scanned_at: datetime | None = None  # scan
    served_key: str | None = None  # derive: the object download serves (the original or a rendition)
    size: int | None = None  # derive: the served object's bytes
    sha256: str | None = None  # derive: the served object's digest (hex)
    text: str | None = None  # derive: the text extracted for search (PDFs)
    metadata: dict[str, Any] | None = None  # the row's whole metadata, the steps' merged into what it had

    def merge(self, other: FileFacts) -> FileFacts:
        """Take every fact `other` found (a later step's word wins)."""
        for f in fields(other):
            value = getattr(other, f.name)
            if value is not None:
                setattr(self, f.name, value)
        return self
