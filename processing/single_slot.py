"""Single-slot profiles (avatar): a new ready file replaces the owner's older ones."""

from __future__ import annotations

import uuid

from django.db import transaction
from django.utils import timezone

from attachments.models import Attachment, Lifecycle, Status
from attachments.profiles import all_profiles


def replace_older_single_slot(attachment_id: uuid.UUID, profile_name: str) -> int:
    """Discard older ready files in the same single-slot profile (the sweeper deletes them).

    The profile is checked first: most profiles are not single-slot, and then
    there is nothing to query.
    """
    profile = all_profiles().get(profile_name)
    if profile is None or not profile.single_per_owner:
        return 0
    attachment = Attachment.objects.filter(pk=attachment_id, status=Status.READY, profile=profile_name).first()
    if attachment is None:
        return 0
    now = timezone.now()
    with transaction.atomic():
        older = (
            Attachment.objects.select_for_update()
            .filter(owner_id=attachment.owner_id, profile=attachment.profile, status=Status.READY,
                    created_at__lt=attachment.created_at)
            .exclude(pk=attachment.pk)
            .exclude(lifecycle__in=[Lifecycle.DISCARDED, Lifecycle.DELETED])
        )
        # "Replace, then delete": the new one is already ready; the old ones stop
        # being served now and lose their bytes on the sweeper's next tick.
        return older.update(lifecycle=Lifecycle.DISCARDED, discarded_at=now, expires_at=now, updated_at=now)
