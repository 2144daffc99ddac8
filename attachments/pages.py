"""The upload page (`/`): the reference browser client of the API, for a signed-in user."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from .notices import service_notices
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_GET


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
    response = render(request, "upload.html", {
        "tenant": membership.tenant.slug if membership else None,
        # Paused uploads (this tenant's) and active brakes, as a banner: a refused upload is no surprise.
        "notices": service_notices(tenant_id=membership.tenant_id if membership else None),
        # Over this size an S3 intent is a multipart plan straight to the bucket (resumable
        # per part, no bytes through us): the page prefers it to tus there.
        "direct_multipart_bytes": settings.AIRLOCK_S3_MULTIPART_THRESHOLD if settings.AIRLOCK_STORAGE == "s3" else "",
    })
    # The page loads only its own script and style; thumbnails come as blob: URLs.
    connect = " ".join(["'self'", *_upload_origins()])
    response["Content-Security-Policy"] = (
        "default-src 'self'; img-src 'self' blob:; script-src 'self'; style-src 'self'; "
        f"connect-src {connect}; "
        "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )
    response["Cache-Control"] = "no-store"
    return response
