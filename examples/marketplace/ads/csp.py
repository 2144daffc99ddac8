"""A strict Content-Security-Policy: scripts and styles from this host only; uploads and images from Airlock."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpRequest, HttpResponse


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        # The browser sends photos to Airlock (or its bucket) and shows Airlock's signed thumbnails.
        others = " ".join(dict.fromkeys([_origin(settings.AIRLOCK_URL), *map(_origin, settings.UPLOAD_ORIGINS)]))
        self.policy = (
            f"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: {others}; "
            f"connect-src 'self' {others}; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
        )

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.setdefault("Content-Security-Policy", self.policy)
        response.setdefault("X-Content-Type-Options", "nosniff")
        return response
