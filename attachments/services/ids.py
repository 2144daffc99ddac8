"""Attachment ids as clients send them: the valid ones parsed, the others kept (shortened) to report."""

from __future__ import annotations

import uuid
from collections.abc import Iterable


def parse_ids(ids: Iterable[object]) -> tuple[list[uuid.UUID], list[str]]:
    good, bad = [], []
    for raw in ids:
        try:
            good.append(uuid.UUID(str(raw)))
        except (ValueError, TypeError, AttributeError):
            bad.append(str(raw)[:64])
    return good, bad
