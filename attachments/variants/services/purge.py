"""Forget a file's named variants: their rows at once, their objects after commit unless a brake holds deletes.

Variants are a cache of what `download` serves, made again on the next request:
dropping them loses nothing. They are dropped when a file stops being `ready`
(a takedown, a rescan hit, a reprocess, a lost original: attachments/services/transitions.py calls
`variants_forget` on the locked row), when reconcile finds a variant row whose
object is gone, and when staff purge them from the admin (audited, attachments/services/moderation.py).

Objects are deleted after the transaction commits, and only while the sweeper's
brakes are off: under the killswitch or dry run they stay, rowless, and
reconcile deletes them as orphans once the brakes are released (it obeys the
same brakes). A failed delete leaves an orphan for reconcile too.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from django.db import transaction

from ...models import Derivative, VariantClaim
from ...storage import get_gateway

log = logging.getLogger("airlock.variants")

VARIANT_KIND_PREFIX = "variant:"


@dataclass(frozen=True)
class ForgottenVariants:
    count: int
    bytes: int
    kept: str = ""  # the brake that kept the objects in storage ("" when their deletes were scheduled)


def _delete_objects(keys: list[str]) -> None:
    gateway = get_gateway()
    for key in keys:
        try:
            gateway.delete(key)
        except Exception as exc:  # noqa: BLE001 - a rowless object is reconcile's orphan: nothing is lost
            log.warning("variant delete failed", extra={"key": key, "error": str(exc)[:200]})


def forget_stored_object(key: str) -> None:
    """Delete a variant object no row records (made for a file that stopped being served), brakes permitting."""
    from ...brakes import delete_brake

    if not delete_brake():
        _delete_objects([key])  # else reconcile deletes it as an orphan once the brakes are off


def variants_forget(attachment_id: uuid.UUID, *, keys_only: list[str] | None = None) -> ForgottenVariants:
    """Drop the file's variant rows (or those stored at `keys_only`) and claims; their objects go after commit.

    Call inside the caller's transaction: the rows go with its commit, the objects after it.
    """
    from ...brakes import delete_brake

    rows = Derivative.objects.filter(attachment_id=attachment_id, kind__startswith=VARIANT_KIND_PREFIX)
    if keys_only is not None:
        rows = rows.filter(storage_key__in=keys_only)
    found = list(rows.values_list("pk", "storage_key", "size"))
    if keys_only is None:
        VariantClaim.objects.filter(attachment_id=attachment_id).delete()
    if not found:
        return ForgottenVariants(0, 0)
    Derivative.objects.filter(pk__in=[pk for pk, _, _ in found]).delete()
    keys = [key for _, key, _ in found]
    brake = delete_brake()
    if brake:
        log.warning(
            "kept variant objects: sweeper brake on",
            extra={"attachment_id": str(attachment_id), "brake": brake, "keys": len(keys)},
        )
    else:
        transaction.on_commit(lambda: _delete_objects(keys))
    return ForgottenVariants(len(found), sum(size for _, _, size in found), brake)
