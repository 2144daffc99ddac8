"""The wedding host's pages (thin: the work is in services). No script runs on them: forms and links only."""

from __future__ import annotations

import secrets

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from airlock_client import AirlockError

from . import services
from .models import Event


def couple_of(request: HttpRequest) -> str:
    """The browser session is the couple (a demo without accounts)."""
    if "couple" not in request.session:
        request.session["couple"] = secrets.token_hex(16)
    return str(request.session["couple"])


def own_event(request: HttpRequest, event_id: int) -> Event:
    return get_object_or_404(Event, pk=event_id, couple=couple_of(request))


@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok", content_type="text/plain")


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    couple = couple_of(request)
    events = list(Event.objects.filter(couple=couple).order_by("-created_at"))
    waiting = services.waiting_counts(couple=couple)
    return render(request, "album/home.html", {"events": [(e, waiting.get(e.pk, 0)) for e in events]})


@require_POST
def event_new(request: HttpRequest) -> HttpResponse:
    title = request.POST.get("title", "").strip() or "Our wedding"
    try:
        event = services.event_create(couple=couple_of(request), title=title)
    except AirlockError as refused:
        return render(request, "album/home.html", {"events": [], "error": str(refused)}, status=502)
    return redirect("event-detail", event_id=event.pk)


@require_GET
def event_detail(request: HttpRequest, event_id: int) -> HttpResponse:
    event = own_event(request, event_id)
    return render(
        request,
        "album/event.html",
        {"event": event, "pending": services.event_pending(event=event), "done": request.GET.get("done", "")},
    )


@require_GET
def event_qr(request: HttpRequest, event_id: int) -> HttpResponse:
    event = own_event(request, event_id)
    response = HttpResponse(services.event_qr_svg(event=event), content_type="image/svg+xml")
    response["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'"
    return response


@require_GET
def event_print(request: HttpRequest, event_id: int) -> HttpResponse:
    return render(request, "album/print.html", {"event": own_event(request, event_id)})


@require_POST
def event_decide(request: HttpRequest, event_id: int) -> HttpResponse:
    event = own_event(request, event_id)
    approve = request.POST.get("decision") == "approve"
    count = services.event_decide(event=event, ids=request.POST.getlist("ids"), approve=approve)
    done = f"{count} {'approved' if approve else 'declined'}"
    return redirect(f"/events/{event.pk}?done={done.replace(' ', '+')}")


@require_GET
def gallery(request: HttpRequest, key: str) -> HttpResponse:
    event = get_object_or_404(Event, share_key=key)
    return render(request, "album/gallery.html", {"event": event, "items": services.gallery_items(event=event)})


@require_GET
def gallery_album(request: HttpRequest, key: str) -> HttpResponse:
    """The ZIP of the whole album: a fresh signed link from Airlock, which streams it (the host never holds it)."""
    event = get_object_or_404(Event, share_key=key)
    url = services.album_link(event=event)
    if url is None:
        return redirect("gallery", key=key)
    return redirect(url)
