"""The marketplace's pages and the draft page's small JSON endpoints (thin: the work is in services)."""

from __future__ import annotations

import json
import secrets
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from . import services
from .models import Ad, Photo


def seller_of(request: HttpRequest) -> str:
    """The browser session is the seller (a demo without accounts)."""
    if "seller" not in request.session:
        request.session["seller"] = secrets.token_hex(16)
    return str(request.session["seller"])


def own_draft(request: HttpRequest, ad_id: int) -> Ad:
    return get_object_or_404(Ad, pk=ad_id, seller=seller_of(request), state=Ad.State.DRAFT)


def photo_json(photo: Photo) -> dict[str, Any]:
    return {
        "id": str(photo.attachment_id),
        "filename": photo.filename,
        "status": photo.status,
        "reason": photo.reason,
        "committed": photo.committed,
        "thumbnail": photo.thumbnail_url if photo.status == Photo.Status.READY else None,
    }


def photos_json(ad: Ad) -> JsonResponse:
    photos = services.thumbnails_fresh(list(ad.photos.all()))
    return JsonResponse({"photos": [photo_json(p) for p in photos]})


@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok", content_type="text/plain")


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    seller = seller_of(request)
    return render(
        request,
        "ads/home.html",
        {
            "ads": Ad.objects.filter(state=Ad.State.POSTED).order_by("-posted_at")[:50],
            "drafts": Ad.objects.filter(seller=seller, state=Ad.State.DRAFT).order_by("-created_at"),
        },
    )


@require_POST
def ad_new(request: HttpRequest) -> HttpResponse:
    ad = services.draft_create(seller=seller_of(request))
    return redirect("draft-edit", ad_id=ad.pk)


@require_GET
def draft_edit(request: HttpRequest, ad_id: int) -> HttpResponse:
    ad = own_draft(request, ad_id)
    return render(
        request,
        "ads/draft.html",
        {
            "ad": ad,
            "heartbeat_seconds": settings.HEARTBEAT_SECONDS,
            "airlock_url": settings.AIRLOCK_URL,
            "client_token": services.draft_client_token(seller=ad.seller)["token"],
            "profile": services.PROFILE,
        },
    )


def draft_photos(request: HttpRequest, ad_id: int) -> HttpResponse:
    """GET: the photos as the host knows them (its own records); POST: record one the browser created."""
    ad = own_draft(request, ad_id)
    if request.method == "GET":
        return photos_json(ad)
    if request.method != "POST":
        return HttpResponse(status=405)
    try:
        attachment_id = str(json.loads(request.body)["id"])
    except (ValueError, KeyError, TypeError):
        return JsonResponse({"error": "the attachment id is needed"}, status=400)
    try:
        photo = services.draft_photo_record(ad=ad, attachment_id=attachment_id)
    except services.PhotoRefused as refused:
        return JsonResponse({"error": str(refused)}, status=refused.status)
    return JsonResponse(photo_json(photo), status=201)


@require_POST
def draft_post(request: HttpRequest, ad_id: int) -> HttpResponse:
    ad = services.draft_post(ad=own_draft(request, ad_id), title=request.POST.get("title", "").strip() or "Untitled")
    return redirect("ad-detail", ad_id=ad.pk)


@require_POST
def draft_cancel(request: HttpRequest, ad_id: int) -> HttpResponse:
    services.draft_cancel(ad=own_draft(request, ad_id))
    return redirect("home")


@require_GET
def ad_detail(request: HttpRequest, ad_id: int) -> HttpResponse:
    ad = get_object_or_404(Ad, pk=ad_id, state=Ad.State.POSTED)
    photos = services.thumbnails_fresh(list(ad.photos.filter(committed=True)))
    return render(
        request,
        "ads/ad.html",
        {
            "ad": ad,
            "ready": [p for p in photos if p.status == Photo.Status.READY],
            "processing": [p for p in photos if p.status in (Photo.Status.UPLOADING, Photo.Status.PENDING)],
        },
    )
