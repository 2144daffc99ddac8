"""What the marketplace does with an ad's photos: every change to its records goes through here.

Airlock is called outside the database transactions (a slow answer never holds a lock);
the host's rows change after Airlock said yes.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from airlock_client import AttachmentInvalid, NotFound

from .airlock import absolute, airlock, link_expiry
from .models import Ad, Photo, WebhookDelivery

log = logging.getLogger("ads")

GONE = (Photo.Status.REJECTED, Photo.Status.FAILED, Photo.Status.DISCARDED, Photo.Status.DELETED)
PROFILE = "image"  # Airlock's profile for photos: its allowed types and limits apply
REFRESH_BEFORE = 300  # seconds: a thumbnail link this close to its `exp` is read again
CLIENT_TOKEN_SECONDS = 3600  # a draft page's client token; reopening the draft mints a fresh one
MAX_PHOTOS = 20  # photos a draft page may upload with its token


class PhotoRefused(Exception):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def draft_create(*, seller: str) -> Ad:
    return Ad.objects.create(seller=seller)


def draft_client_token(*, seller: str) -> dict[str, Any]:
    """A client token for the seller's browser: it uploads photos (profile `image`) for this seller only.

    No ref is granted: posting (the commit) stays the host's. The browser never sees the service token.
    """
    with airlock() as client:
        return dict(client.mint_client_token(seller, CLIENT_TOKEN_SECONDS, profiles=[PROFILE], max_files=MAX_PHOTOS))


def draft_photo_record(*, ad: Ad, attachment_id: str) -> Photo:
    """Record a photo the seller's browser created in Airlock, once Airlock confirms it is this seller's."""
    with airlock(seller=ad.seller) as client:
        try:
            resource = client.get(attachment_id)  # another seller's file is NotFound here
        except NotFound:
            raise PhotoRefused("no such photo", status=404) from None
    photo, _ = Photo.objects.get_or_create(
        attachment_id=resource["id"], defaults={"ad": ad, "filename": resource.get("filename", "")[:255]}
    )
    if photo.ad_id != ad.pk:
        raise PhotoRefused("this photo belongs to another draft", status=409)
    return photo


def draft_post(*, ad: Ad, title: str) -> Ad:
    """Commit the draft's photos to `ad:<id>` in Airlock, then mark the ad posted."""
    photos = {str(p.attachment_id): p for p in ad.photos.exclude(status__in=GONE)}
    ids = list(photos)
    with airlock(seller=ad.seller) as client:
        for _ in range(2):
            if not ids:
                break
            try:
                client.commit(ids, ref=ad.ref)
                break
            except AttachmentInvalid as refused:
                # Rejected (or gone) since the host last heard: leave those out, commit the rest.
                for attachment_id, why in (refused.details or {}).items():
                    Photo.objects.filter(attachment_id=attachment_id).exclude(status__in=GONE).update(
                        status=Photo.Status.REJECTED if why == "rejected" else Photo.Status.DELETED, reason=why
                    )
                ids = [i for i in ids if i not in (refused.details or {})]
    with transaction.atomic():
        Photo.objects.filter(ad=ad, attachment_id__in=ids).update(committed=True)
        ad.title = title[:200]
        ad.state = Ad.State.POSTED
        ad.posted_at = timezone.now()
        ad.save(update_fields=["title", "state", "posted_at"])
    return ad


def draft_cancel(*, ad: Ad) -> None:
    """Discard the draft's photos in Airlock (swept on its next run) and close the draft."""
    live = list(ad.photos.exclude(status__in=GONE))
    with airlock(seller=ad.seller) as client:
        for photo in live:
            try:
                client.discard(str(photo.attachment_id))
            except NotFound:  # already gone in Airlock
                pass
    with transaction.atomic():
        Photo.objects.filter(pk__in=[p.pk for p in live]).update(status=Photo.Status.DISCARDED)
        ad.state = Ad.State.CANCELLED
        ad.save(update_fields=["state"])


@dataclass(frozen=True)
class Applied:
    photo: Photo | None
    duplicate: bool = False


# Webhook type → the photo's status; `attachment.committed` changes `committed` only.
EVENT_STATUS = {
    "attachment.ready": Photo.Status.READY,
    "attachment.rejected": Photo.Status.REJECTED,
    "attachment.failed": Photo.Status.FAILED,
    "attachment.deleted": Photo.Status.DELETED,
}


def webhook_apply(*, webhook_id: str, event: dict[str, Any]) -> Applied:
    """Record what Airlock reports about one of our photos (once per webhook id, never older over newer)."""
    data = event.get("data") or {}
    with transaction.atomic():
        _, created = WebhookDelivery.objects.get_or_create(webhook_id=webhook_id)
        if not created:
            return Applied(None, duplicate=True)
        photo = Photo.objects.select_for_update().filter(attachment_id=data.get("id")).first()
        if photo is None:  # another application's file in the same Airlock tenant, or not ours at all
            return Applied(None)
        kind = event.get("type")
        if kind == "attachment.committed":
            photo.committed = True
            photo.save(update_fields=["committed"])
            log.info("webhook %s: photo %s is committed to %s", kind, photo.attachment_id, data.get("ref"))
            return Applied(photo)
        status = EVENT_STATUS.get(str(kind))
        happened = datetime.fromisoformat(str(event["timestamp"]))  # "…Z" parses since Python 3.11
        if status is None or (photo.event_at and happened <= photo.event_at):
            return Applied(photo)  # an event type we do not use, or older than what we know
        if photo.status == Photo.Status.DISCARDED and status != Photo.Status.DELETED:
            return Applied(photo)  # the seller cancelled: only its removal is news
        photo.status = status
        photo.event_at = happened
        reason = data.get("reason") or {}
        photo.reason = str(reason.get("message") or reason.get("code") or "")[:500]
        thumbnail = (data.get("links") or {}).get("thumbnail") if status == Photo.Status.READY else None
        photo.thumbnail_url = absolute(thumbnail) if thumbnail else ""
        photo.thumbnail_expires = link_expiry(thumbnail) if thumbnail else 0
        photo.save(update_fields=["status", "event_at", "reason", "thumbnail_url", "thumbnail_expires"])
    log.info("webhook %s: photo %s is %s", kind, photo.attachment_id, photo.status)
    return Applied(photo)


def thumbnails_fresh(photos: list[Photo]) -> list[Photo]:
    """Re-read the resource of ready photos whose signed thumbnail link is about to expire (links last an hour)."""
    stale = [p for p in photos if p.status == Photo.Status.READY and p.thumbnail_expires < time.time() + REFRESH_BEFORE]
    if not stale:
        return photos
    with airlock() as client:
        for photo in stale:
            try:
                link = (client.get(str(photo.attachment_id)).get("links") or {}).get("thumbnail")
            except NotFound:
                continue
            if link:
                photo.thumbnail_url, photo.thumbnail_expires = absolute(link), link_expiry(link)
                Photo.objects.filter(pk=photo.pk).update(
                    thumbnail_url=photo.thumbnail_url, thumbnail_expires=photo.thumbnail_expires
                )
    return photos
