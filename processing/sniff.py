"""Type detection from the first bytes only; the declared type is never consulted."""

from __future__ import annotations

import filetype


def detect_type(head: bytes) -> str | None:
    if not head:
        return None
    kind = filetype.guess(head)
    return kind.mime if kind is not None else None
