"""The upload page: the reference browser client of the API.

`/` for a signed-in user (the session cookie); `/upload#token=…` for anyone a
host handed a client token (the page sends it as a Bearer token, no session).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_GET

from .notices import service_notices

UPPY_LOCALES_DIR = Path(__file__).resolve().parent / "static" / "airlock" / "vendor" / "uppy" / "locales"


@cache
def uppy_locales() -> tuple[str, ...]:
    """The Uppy locales vendored with the page (de_DE, fr_FR, …): the page loads the browser's one."""
    return tuple(sorted(p.name.removesuffix(".min.js") for p in UPPY_LOCALES_DIR.glob("*.min.js")))


def _upload_origins() -> list[str]:
    """Where the browser may send upload bytes besides this origin (S3, a public URL)."""
    origins = []
    for url in (settings.AIRLOCK_PUBLIC_URL, settings.AIRLOCK_S3_ENDPOINT_URL):
        if url:
            parts = urlsplit(url)
            if parts.scheme and parts.netloc:
                origins.append(f"{parts.scheme}://{parts.netloc}")
    if settings.AIRLOCK_STORAGE == "s3" and not settings.AIRLOCK_S3_ENDPOINT_URL:
        origins.append("https://*.amazonaws.com")
    return origins


@require_GET
@login_required(login_url="/admin/login/")
@ensure_csrf_cookie
def upload_page(request: HttpRequest) -> HttpResponse:
    """Serve the page; everything else happens through /api/v1 with the session cookie."""
    membership = getattr(request.user, "membership", None)
    return page_response(
        request,
        tenant=membership.tenant.slug if membership else None,
        notices=service_notices(tenant_id=membership.tenant_id if membership else None),
    )


@require_GET
def client_upload_page(request: HttpRequest) -> HttpResponse:
    """The same page for a client token in the URL's fragment: no sign-in, nothing of the session used."""
    return page_response(request, tenant=None, notices=[], client=True)


def page_response(
    request: HttpRequest, *, tenant: str | None, notices: list, client: bool = False, extra: dict | None = None
) -> HttpResponse:
    """The upload page; `extra`: more context (the guest page's link and token, attachments/links/page.py)."""
    s3 = settings.AIRLOCK_STORAGE == "s3"
    response = render(
        request,
        "upload.html",
        {
            **(extra or {}),
            "client": client,
            "tenant": tenant,
            # Local storage: Uppy's Tus plugin. S3: Uppy's AwsS3 plugin on our intents; over this size
            # an intent is a multipart plan of parts this large (Uppy must cut the file the same way).
            "storage": "s3" if s3 else "local",
            "multipart_bytes": settings.AIRLOCK_S3_MULTIPART.threshold_bytes if s3 else "",
            "part_size": settings.AIRLOCK_S3_MULTIPART.part_bytes if s3 else "",
            "uppy_locales": " ".join(uppy_locales()),
            # The variants' long edges per profile: the page gives each thumbnail a srcset over them.
            "variant_edges": json.dumps(settings.AIRLOCK_VARIANTS, sort_keys=True),
            # Paused uploads (this tenant's) and active brakes, as a banner: a refused upload is no surprise.
            "notices": notices,
        },
    )
    # The page loads only its own scripts (Uppy's bundle and locale are static files here) and
    # styles; thumbnails and their variants are signed links here (redirected to S3 on S3), posters
    # and Uppy's previews blob: URLs, Uppy's stylesheet draws its icons from data: URLs. Uppy styles
    # elements through the DOM (el.style), which style-src allows.
    origins = _upload_origins()
    connect = " ".join(["'self'", *origins])
    images = " ".join(["'self'", *origins, "blob:", "data:"])
    media = " ".join(["'self'", *origins])  # a video's player: its signed links (redirected to S3 on S3)
    response["Content-Security-Policy"] = (
        f"default-src 'self'; img-src {images}; media-src {media}; script-src 'self'; style-src 'self'; "
        f"connect-src {connect}; "
        "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )
    response["Cache-Control"] = "no-store"
    return response
