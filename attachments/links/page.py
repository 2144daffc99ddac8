"""An upload link's page for guests (`/l/<id>`) and its QR codes.

No account and no sign-in: the device is a guest of the link, identified by a
random device id in a signed, HttpOnly, SameSite=Lax cookie (`airlock_guest`,
scoped to `/l/`). Each visit mints a short-lived client token for the guest's
subject (services/upload_links.link_guest_open), delivered inside the page, never
in a URL. Why a client token and not the cookie itself on the API: the upload
page already speaks with client tokens (tus, intents, S3 multipart, status,
discard), the allowlist already confines them (attachments/client_tokens/scope.py), and a
bearer header is not sent by the browser on its own, so the API needs no CSRF
defence for guests; the cookie only says which guest the device is.
"""

from __future__ import annotations

import io
from functools import partial

import segno
from django.conf import settings
from django.core import signing
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from ..api.links import absolute_url
from ..errors import LinkGone, NotFound
from ..pages import page_response
from .services.upload_links import link_for_page, link_guest_open, link_profiles, link_state, new_device_id

COOKIE = "airlock_guest"
COOKIE_SALT = "airlock.guest-device"
COOKIE_PATH = "/l/"
COOKIE_MAX_AGE = 400 * 86400  # the longest browsers keep a cookie

_dumps = partial(signing.dumps, salt=COOKIE_SALT)


def device_of(request: HttpRequest) -> str | None:
    """The device id the cookie holds, if its signature is ours."""
    raw = request.COOKIES.get(COOKIE)
    if not raw:
        return None
    try:
        value = signing.loads(raw, salt=COOKIE_SALT)
    except signing.BadSignature:
        return None
    return value if isinstance(value, str) and 8 <= len(value) <= 64 else None


def _closed(request: HttpRequest, *, status: int, title: str, message: str) -> HttpResponse:
    response = render(request, "guest_closed.html", {"title": title, "message": message}, status=status)
    response["Cache-Control"] = "no-store"
    response["Content-Security-Policy"] = "default-src 'none'; style-src 'self'; base-uri 'none'"
    return response


@require_GET
def guest_page(request: HttpRequest, link_id) -> HttpResponse:
    """The link's upload page, or a page that says in plain words why it is closed."""
    now = timezone.now()
    try:
        link = link_for_page(link_id)
    except NotFound:
        return _closed(
            request,
            status=404,
            title="Link not found",
            message="This upload link does not exist. Check that you scanned or typed the whole address.",
        )
    device = device_of(request) or new_device_id()
    try:
        session = link_guest_open(link=link, device_id=device, now=now)
    except LinkGone:
        state = link_state(link, now)
        message = (
            "The organiser has closed this upload link, so it no longer takes photos or videos."
            if state == "disabled"
            else "This upload link has expired, so it no longer takes photos or videos."
        )
        return _closed(request, status=410, title=link.title or "Upload closed", message=message)
    response = page_response(
        request,
        tenant=None,
        notices=[],
        client=True,
        extra={
            "guest": True,
            "guest_title": link.title,
            "guest_token": session.key,
            "guest_profiles": " ".join(link_profiles(link)),
            "guest_limit": link.max_files_per_guest or "",
            "undo_hours": settings.AIRLOCK_GUEST_UNDO_HOURS,
        },
    )
    response.set_cookie(
        COOKIE,
        _dumps(device),
        max_age=COOKIE_MAX_AGE,
        path=COOKIE_PATH,
        secure=request.is_secure(),
        httponly=True,
        samesite="Lax",
    )
    return response


def _qr(request: HttpRequest, link_id):
    try:
        link = link_for_page(link_id)
    except NotFound:
        return None
    return segno.make(absolute_url(request, reverse("guest-page", kwargs={"link_id": link.pk})), error="m")


def _qr_response(request: HttpRequest, link_id, *, content_type: str, **save) -> HttpResponse:
    code = _qr(request, link_id)
    if code is None:
        return HttpResponse(status=404)
    out = io.BytesIO()
    code.save(out, border=4, **save)
    response = HttpResponse(out.getvalue(), content_type=content_type)
    response["Cache-Control"] = "public, max-age=86400"
    return response


@require_GET
def guest_qr_svg(request: HttpRequest, link_id) -> HttpResponse:
    """The link's QR code as SVG: it encodes only the page's URL, so it is public."""
    response = _qr_response(request, link_id, content_type="image/svg+xml", kind="svg", scale=8, xmldecl=False)
    if response.status_code == 200:
        response["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'"
    return response


@require_GET
def guest_qr_png(request: HttpRequest, link_id) -> HttpResponse:
    """The link's QR code as PNG (for printing)."""
    return _qr_response(request, link_id, content_type="image/png", kind="png", scale=10)
