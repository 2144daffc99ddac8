"""Cross-origin access to the API and tus (django-cors-headers), from AIRLOCK_CORS_*.

A browser app on another origin sends `Authorization: Token …`, not cookies, so
it needs no credentialed CORS: credentials stay off unless asked for, and never
with the `*` wildcard. The same origin list is what `manage.py s3_setup` puts in
the bucket's CORS (presigned uploads go straight to the bucket).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

# Only the API (tus included); pages, admin, /metrics and the probes stay same-origin.
URLS_REGEX = r"^/api/.*$"

# Request headers a client sends beyond the CORS-safelisted ones (docs/api.md, "Cross-origin").
ALLOW_HEADERS = (
    "accept",
    "authorization",
    "airlock-subject",
    "content-type",
    "user-agent",
    "x-csrftoken",
    "x-requested-with",
    "x-request-id",
    "range",
    "tus-resumable",
    "upload-length",
    "upload-offset",
    "upload-metadata",
    "upload-checksum",
    "upload-defer-length",
    "upload-concat",
    "x-http-method-override",
)

# Response headers a script may read (the safelisted ones, Content-Type and Content-Length, need no listing).
EXPOSE_HEADERS = (
    "Location",
    "Upload-Offset",
    "Upload-Length",
    "Upload-Expires",
    "Upload-Metadata",
    "Tus-Resumable",
    "Tus-Version",
    "Tus-Max-Size",
    "Tus-Extension",
    "Tus-Checksum-Algorithm",
    "ETag",
    "Retry-After",
    "Airlock-Wait",
    "X-Request-ID",
    "WWW-Authenticate",
    "Content-Disposition",
    "Content-Range",
    "Accept-Ranges",
)

ALLOW_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


def cors_origins(items: list[str]) -> list[str]:
    """AIRLOCK_CORS_ALLOWED_ORIGINS checked: `*` alone, or http(s) origins (scheme://host[:port], no path)."""
    if "*" in items:
        if items != ["*"]:
            raise ImproperlyConfigured(
                "AIRLOCK_CORS_ALLOWED_ORIGINS: `*` allows every origin; list nothing else with it"
            )
        return items
    origins = []
    for item in items:
        try:
            parts = urlsplit(item)
            port_ok = parts.port is None or parts.port > 0
        except ValueError:
            parts, port_ok = None, False
        if (
            parts is None
            or not port_ok
            or parts.scheme not in ("http", "https")
            or not parts.hostname
            or parts.path
            or parts.query
            or parts.fragment
            or parts.username
            or parts.password
        ):
            raise ImproperlyConfigured(
                f"AIRLOCK_CORS_ALLOWED_ORIGINS entries must be origins like https://app.example.com or "
                f"http://localhost:3000 (scheme://host[:port], no path or trailing slash), not {item!r}"
            )
        origins.append(f"{parts.scheme}://{parts.netloc}".lower())
    return origins


def cors_settings(origins: list[str], *, allow_credentials: bool) -> dict[str, Any]:
    """The CORS_* settings for django-cors-headers; a wildcard with credentials is refused."""
    allow_all = origins == ["*"]
    if allow_all and allow_credentials:
        raise ImproperlyConfigured(
            "AIRLOCK_CORS_ALLOW_CREDENTIALS needs an explicit AIRLOCK_CORS_ALLOWED_ORIGINS "
            "list, not `*` (any site could act with a signed-in user's session)"
        )
    return {
        "CORS_ALLOW_ALL_ORIGINS": allow_all,
        "CORS_ALLOWED_ORIGINS": [] if allow_all else origins,
        "CORS_ALLOW_CREDENTIALS": allow_credentials,
        "CORS_URLS_REGEX": URLS_REGEX,
        "CORS_ALLOW_HEADERS": list(ALLOW_HEADERS),
        "CORS_EXPOSE_HEADERS": list(EXPOSE_HEADERS),
        "CORS_ALLOW_METHODS": list(ALLOW_METHODS),
    }
