"""Ready files whose objects vanished from storage: fail them, or have their derivatives made again.

Reconcile (sweeper/missing_objects.py) finds them; these record what it
decided. An original gone means nothing is left to serve or derive from: the
row becomes failed/object_missing (a webhook `attachment.failed` follows from
the transition). Only derivatives gone, the original still there: the row
stays ready and served, and a `rederive` job makes them again from the
original (processing.pipeline.rederive), recorded by
`attachment_derivatives_restore`. A named variant gone: its row is dropped
(`attachment_variants_drop_missing`), and the next request makes it again.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction

from ... import jobs
from ...facts import FileFacts
from ...models import Attachment, Lifecycle, Status
from ...services import outbox
from ...services.derivatives import derivatives_upsert
from ...services.processing import facts_columns
from ...services.transitions import apply_transition, lock_attachment
from ...variants.services.purge import variants_forget

# Lifecycles whose objects are meant to be in storage (discarded and deleted ones are the sweeper's).
LIVE_LIFECYCLES = (Lifecycle.STAGED, Lifecycle.COMMITTED, Lifecycle.RELEASED)
MISSING_MESSAGE = "The stored original is no longer in storage (found by reconcile)."

# The columns a regenerated served rendition may change (its bytes are made again, so its digest too).
_SERVED_FIELDS = ("served_key", "size", "sha256", "content_type")


def _still_the_same_ready_file(attachment: Attachment | None, working_key: str) -> bool:
    # Re-checked under the row lock: a rescan, a take-down or a discard since reconcile looked wins.
    return (
        attachment is not None
        and attachment.status == Status.READY
        and attachment.lifecycle in LIVE_LIFECYCLES
        and attachment.working_key == working_key
    )


def attachment_fail_missing(
    *, attachment_id: uuid.UUID, working_key: str, actor: str, message: str = MISSING_MESSAGE
) -> bool:
    """ready → failed/object_missing, if the row still serves `working_key`; False when it moved on."""
    with transaction.atomic():
        attachment = lock_attachment(attachment_id)
        if attachment is None or not _still_the_same_ready_file(attachment, working_key):
            return False
        apply_transition(attachment, "lose", actor=actor, message=message)
    return True


def attachment_rederive_request(*, attachment_id: uuid.UUID, working_key: str) -> bool:
    """Queue a job that makes a ready file's derivatives again; the file stays ready and served."""
    with transaction.atomic():
        attachment = lock_attachment(attachment_id)
        if attachment is None or not _still_the_same_ready_file(attachment, working_key):
            return False
        outbox.enqueue(jobs.REDERIVE, attachment.pk)
    return True


def attachment_derivatives_restore(
    *, attachment_id: uuid.UUID, working_key: str, derivatives: list[dict[str, Any]], facts: FileFacts
) -> bool:
    """Record derivatives made again from `working_key` (one row per kind, replaced), and the served rendition's
    facts."""
    with transaction.atomic():
        attachment = lock_attachment(attachment_id)
        if attachment is None or not _still_the_same_ready_file(attachment, working_key):
            return False
        derivatives_upsert(attachment, derivatives)
        fields = facts_columns(facts)
        served = {name: fields[name] for name in _SERVED_FIELDS if name in fields}
        if served:
            # No status change and no usage change (the stored size is the original's): a plain update.
            Attachment.objects.filter(pk=attachment.pk).update(**served)
    return True


def attachment_variants_drop_missing(*, attachment_id: uuid.UUID, keys: list[str]) -> int:
    """Drop the variant rows stored at `keys` (their objects are gone): the next request makes them again."""
    with transaction.atomic():
        return variants_forget(attachment_id, keys_only=keys).count
