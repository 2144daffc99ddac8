"""A strict Content-Security-Policy: no scripts at all; photos, posters and videos from Airlock (and its bucket)."""

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
        # Airlock's signed links, and on S3 the presigned GETs they redirect to.
        others = " ".join(dict.fromkeys([_origin(settings.AIRLOCK_URL), *map(_origin, settings.MEDIA_ORIGINS)]))
        self.policy = (
            f"default-src 'none'; style-src 'self'; img-src 'self' {others}; media-src {others}; "
            "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
        )

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.setdefault("Content-Security-Policy", self.policy)
        response.setdefault("X-Content-Type-Options", "nosniff")
        return response
