"""Write a file's derivative rows: one row per kind, a new one replacing what an earlier one wrote."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..models import Attachment, Derivative

# Everything a replaced derivative row takes from the new one (created_at too,
# as if it had been deleted and inserted again).
_DERIVATIVE_UPDATE = ["storage_key", "content_type", "size", "width", "height", "created_at"]


def derivatives_upsert(attachment: Attachment, records: Sequence[Mapping[str, Any]] | None) -> None:
    """Insert `records` as `attachment`'s derivatives, replacing a row of the same kind.

    One INSERT … ON CONFLICT (attachment, kind) DO UPDATE whatever the count, instead of a
    DELETE and an INSERT; no statement at all when there is nothing to write.
    """
    if not records:
        return
    Derivative.objects.bulk_create(
        [Derivative(attachment=attachment, **record) for record in records],
        update_conflicts=True,
        unique_fields=["attachment", "kind"],
        update_fields=_DERIVATIVE_UPDATE,
    )
