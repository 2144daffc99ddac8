"""Type detection from the first bytes only; the declared type is never consulted."""

from __future__ import annotations

import filetype

from processing.isobmff import mime_type as heif_mime_type


def detect_type(head: bytes) -> str | None:
    if not head:
        return None
    # HEIF-family photos by their ftyp brands first: filetype knows only `heic`/`avif`
    # (as major or beside mif1), not heix/heim/heis or a plain mif1 HEIF.
    heif = heif_mime_type(head)
    if heif is not None:
        return heif
    kind = filetype.guess(head)
    return kind.mime if kind is not None else None
