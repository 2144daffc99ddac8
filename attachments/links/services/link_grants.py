"""An upload link's grant, checked at a guest's intent: the link still open, its limits per guest and in all.

Lower than upload_links.py (making links, the guest page), so the intent
service can use it the way it uses client_grants. The counters move by
conditional UPDATEs inside the intent's transaction: concurrent intents of one
guest (or of many guests of one link) cannot pass a limit, and a refused intent
leaves no row. Lock order: the link's row, then the guest's.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from django.db.models import F
from django.db.models.functions import Greatest

from ...errors import LinkGone, QuotaExceeded
from ...models import Approval, ClientToken, LinkGuest, UploadLink

_LINK_COLUMNS = ("id", "ref", "requires_approval", "max_files", "max_files_per_guest", "max_bytes_per_guest")


def link_is_open(link: UploadLink, now: datetime) -> bool:
    return link.disabled_at is None and link.expires_at > now


def link_of_grant(grant: ClientToken | None, *, now: datetime) -> UploadLink | None:
    """The open link a guest's client token was minted for; None for any other caller; LINK_GONE once it closed."""
    if grant is None or grant.upload_link_id is None:
        return None
    link = (
        UploadLink.objects.filter(pk=grant.upload_link_id, disabled_at__isnull=True, expires_at__gt=now)
        .only(*_LINK_COLUMNS)
        .first()
    )
    if link is None:
        raise LinkGone()
    return link


def approval_at_intent(link: UploadLink | None) -> str:
    return Approval.PENDING if link is not None and link.requires_approval else Approval.NOT_REQUIRED


def link_grant_reserve(link: UploadLink, *, subject: str, size: int, now: datetime) -> None:
    """Take one file of `size` declared bytes from the link's and its guest's limits, in the intent's transaction."""
    links = UploadLink.objects.filter(pk=link.pk, disabled_at__isnull=True, expires_at__gt=now)
    if link.max_files is not None:
        links = links.filter(files_used__lte=F("max_files") - 1)
    if not links.update(files_used=F("files_used") + 1):
        used = UploadLink.objects.filter(pk=link.pk).values_list("files_used", flat=True).first()
        if used is None or link.max_files is None or used < link.max_files:
            raise LinkGone()  # closed meanwhile
        raise QuotaExceeded(
            f"This link has taken all its {link.max_files} files.",
            details={"quota": "link_files", "used": used, "limit": link.max_files, "requested": 1},
        )
    guests = LinkGuest.objects.filter(link_id=link.pk, subject=subject)
    if link.max_files_per_guest is not None:
        guests = guests.filter(files_used__lte=link.max_files_per_guest - 1)
    if link.max_bytes_per_guest is not None:
        guests = guests.filter(bytes_used__lte=link.max_bytes_per_guest - size)
    if guests.update(files_used=F("files_used") + 1, bytes_used=F("bytes_used") + size):
        return
    found = LinkGuest.objects.filter(link_id=link.pk, subject=subject).values_list("files_used", "bytes_used").first()
    if found is None:
        raise LinkGone()  # no guest row: the device never opened this link's page
    files_used, bytes_used = found
    if link.max_files_per_guest is not None and files_used + 1 > link.max_files_per_guest:
        raise QuotaExceeded(
            f"You have sent {files_used} of the {link.max_files_per_guest} files this link takes from each guest.",
            details={"quota": "guest_files", "used": files_used, "limit": link.max_files_per_guest, "requested": 1},
        )
    if link.max_bytes_per_guest is not None and bytes_used + size > link.max_bytes_per_guest:
        raise QuotaExceeded(
            f"{size} more bytes would pass the {link.max_bytes_per_guest} bytes this link takes from each guest.",
            details={"quota": "guest_bytes", "used": bytes_used, "limit": link.max_bytes_per_guest, "requested": size},
        )
    raise QuotaExceeded("This link takes no more from you.", details={"quota": "guest_files"})


def link_grant_give_back(*, link_id: uuid.UUID, subject: str, size: int) -> None:
    """Give back what link_grant_reserve took: the file no longer counts against the link's and its guest's limits.

    For a file its guest removed, and for an upload refused before it was kept.
    Lock order as at the intent: the link's row, then the guest's.
    """
    UploadLink.objects.filter(pk=link_id).update(files_used=Greatest(F("files_used") - 1, 0))
    LinkGuest.objects.filter(link_id=link_id, subject=subject).update(
        files_used=Greatest(F("files_used") - 1, 0), bytes_used=Greatest(F("bytes_used") - size, 0)
    )
