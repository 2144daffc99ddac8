"""What the wedding host does: events and their upload links, approval, the gallery. Every change goes through here.

Airlock is called outside the database transactions (a slow answer never holds a lock);
the host's rows change after Airlock said yes.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from airlock_client import Attachment, Client, NotFound

from .airlock import absolute, airlock
from .models import Event, GuestFile, WebhookDelivery

log = logging.getLogger("album")


def event_create(*, couple: str, title: str) -> Event:
    """A new event and its upload link in Airlock: guests' files go to `event:<id>`, after the couple approves."""
    event = Event.objects.create(couple=couple, title=title[:200])
    try:
        with airlock() as client:
            link = client.create_upload_link(
                event.ref,
                timezone.now() + timedelta(days=settings.LINK_DAYS),
                title=event.title,
                profiles=settings.LINK_PROFILES or None,
                requires_approval=True,
            )
    except Exception:
        event.delete()  # no link, no event: the couple tries again
        raise
    event.link_id, event.link_url = link["id"], absolute(link["url"])
    event.qr_svg_url = absolute(link["qr_svg_url"])
    if link.get("expires_at"):
        event.link_expires_at = datetime.fromisoformat(link["expires_at"])
    event.save(update_fields=["link_id", "link_url", "qr_svg_url", "link_expires_at"])
    return event


def event_qr_svg(*, event: Event) -> str:
    """The link's QR code (made by Airlock), fetched once and kept: the host serves it from its own origin."""
    if not event.qr_svg:
        with airlock() as client:
            svg = client.upload_link_qr({"qr_svg_url": event.qr_svg_url, "qr_png_url": ""}, format="svg")
        event.qr_svg = svg.decode()
        Event.objects.filter(pk=event.pk).update(qr_svg=event.qr_svg)
    return event.qr_svg


@dataclass(frozen=True)
class Item:
    """One of the event's files as a page shows it."""

    id: str
    filename: str
    kind: str  # photo | video | file
    status: str
    thumbnail: str  # a signed link, or empty
    full: str  # the photo at a gallery size, or the file itself
    video: str  # what a <video> plays: the web rendition when it is ready, else the download
    poster: str


def _item(resource: Attachment) -> Item:
    links: dict[str, Any] = resource.get("links") or {}
    ctype = resource.get("content_type") or ""
    video = bool(links.get("poster")) or ctype.startswith("video/") or resource.get("profile") == "media"
    kind = "video" if video else "photo" if links.get("thumbnail") or ctype.startswith("image/") else "file"
    variants = links.get("variants") or {}
    web = ((resource.get("renditions") or {}).get("web") or {}).get("status") == "ready" and links.get("web")
    full = variants.get("large") or links.get("display") or links.get("download") or ""
    return Item(
        id=resource["id"],
        filename=resource.get("filename", ""),
        kind=kind,
        status=resource.get("status", ""),
        thumbnail=absolute(links["thumbnail"]) if links.get("thumbnail") else "",
        full=absolute(full) if full else "",
        video=absolute(web or links.get("download") or "") if video and (web or links.get("download")) else "",
        poster=absolute(links["poster"]) if links.get("poster") else "",
    )


def _waiting(client: Client, event: Event) -> list[Attachment]:
    """The event's files that wait for approval, newest first (being checked, or ready to decide on).

    A waiting file is not committed to the ref yet: it is one of the host's staged files, sent by
    one of the link's guests, whose subjects are `guest:<link id, hex>:<device>`.
    """
    guests = f"guest:{uuid.UUID(event.link_id).hex}:"
    return [
        r
        for r in client.iter_attachments(committed=False)
        if r.get("approval") == "pending" and r.get("subject", "").startswith(guests)
    ]


def event_pending(*, event: Event) -> list[Item]:
    """The files guests sent that wait for the couple's approval (Airlock's list, newest first)."""
    with airlock() as client:
        return [_item(r) for r in _waiting(client, event)]


def event_decide(*, event: Event, ids: list[str], approve: bool) -> int:
    """Approve or decline some of the event's pending files; only this event's pending files are touched."""
    with airlock() as client:
        pending = {r["id"]: r for r in _waiting(client, event)}
        chosen = [i for i in dict.fromkeys(ids) if i in pending]
        # Known before Airlock decides: its webhooks about these files then find their event.
        for attachment_id in chosen:
            GuestFile.objects.get_or_create(
                attachment_id=attachment_id,
                defaults={
                    "event": event,
                    "filename": pending[attachment_id].get("filename", "")[:255],
                    "status": pending[attachment_id].get("status", ""),
                    "approval": "pending",
                },
            )
        if chosen:
            (client.approve if approve else client.decline)(chosen)
    log.info("%s %d file(s) of %s", "approved" if approve else "declined", len(chosen), event.ref)
    return len(chosen)


def gallery_items(*, event: Event) -> list[Item]:
    """The event's approved files that can be shown now, oldest first."""
    with airlock() as client:
        shown = [r for r in client.iter_attachments(ref=event.ref) if r.get("available")]
    return [_item(r) for r in reversed(shown) if r.get("approval") in (None, "approved", "not_required")]


def album_link(*, event: Event) -> str | None:
    """A fresh signed link to the ZIP of the event's files (None while it has none)."""
    with airlock() as client:
        try:
            return client.archive_link(event.ref)["url"]
        except NotFound:
            return None


def _event_of(data: dict[str, Any]) -> Event | None:
    """The event a webhook's file belongs to: by its ref, or by the upload link its guest sent it through."""
    ref = str(data.get("ref") or "")
    if ref.startswith("event:") and ref[6:].isdigit():
        return Event.objects.filter(pk=int(ref[6:])).first()
    # Not committed yet (waiting for approval): its guest's subject names the link, `guest:<link hex>:<device>`.
    kind, _, rest = str(data.get("subject") or "").partition(":")
    try:
        link_id = uuid.UUID(rest.partition(":")[0]) if kind == "guest" else None
    except ValueError:
        link_id = None
    return Event.objects.filter(link_id=str(link_id)).first() if link_id else None


def webhook_apply(*, webhook_id: str, event: dict[str, Any]) -> GuestFile | None:
    """Record what Airlock reports about a guest's file (once per webhook id, never older over newer)."""
    data = event.get("data") or {}
    kind = str(event.get("type"))
    with transaction.atomic():
        _, created = WebhookDelivery.objects.get_or_create(webhook_id=webhook_id)
        if not created or not data.get("id"):
            return None
        record = GuestFile.objects.select_for_update().filter(attachment_id=data["id"]).first()
        wedding = record.event if record is not None else _event_of(data)
        if wedding is None:  # another application's file in the same Airlock tenant
            return None
        if record is None:
            record = GuestFile.objects.create(
                attachment_id=data["id"], event=wedding, filename=str(data.get("filename", ""))[:255]
            )
        happened = datetime.fromisoformat(str(event["timestamp"]))  # "…Z" parses since Python 3.11
        decided = {"attachment.approved": "approved", "attachment.declined": "declined"}.get(kind)
        newer = record.event_at is None or happened > record.event_at
        if decided is None and not newer:
            return record  # older than what we know
        # A decision is final whenever its webhook arrives (an approved file's `committed` may come first).
        if decided is not None:
            record.approval = decided
        elif record.approval in ("", "pending"):
            record.approval = str(data.get("approval") or record.approval)
        if newer:
            record.status = "deleted" if kind == "attachment.deleted" else str(data.get("status") or record.status)
            record.event_at = happened
        record.save(update_fields=["status", "approval", "event_at"])
    log.info(
        "webhook %s: %s of %s is %s (approval %s)",
        kind,
        record.attachment_id,
        wedding.ref,
        record.status,
        record.approval or "-",
    )
    return record


def waiting_counts(*, couple: str) -> dict[int, int]:
    """Per event of the couple: ready files the host heard of that wait for approval (a badge, from webhooks)."""
    rows = GuestFile.objects.filter(event__couple=couple, status="ready", approval="pending")
    counts: dict[int, int] = {}
    for event_id in rows.values_list("event_id", flat=True):
        counts[event_id] = counts.get(event_id, 0) + 1
    return counts
