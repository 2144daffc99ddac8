"""Absolute URLs of our own endpoints: from AIRLOCK_PUBLIC_URL when set, never from an unchecked Host.

Upload URLs carry a credential (the signed token): minting them from a
client-supplied Host would send that credential wherever the Host header
points. With AIRLOCK_PUBLIC_URL set the request's Host plays no part; without
it the host is the request's own, which ALLOWED_HOSTS has already checked
(loopback names on the embedded default, an explicit list in production).
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def absolute_url(request: HttpRequest, location: str) -> str:
    """`location` (a path of ours, or an already absolute URL such as a presigned one) made absolute."""
    if not location.startswith("/"):
        return location
    if settings.AIRLOCK_PUBLIC_URL:
        return settings.AIRLOCK_PUBLIC_URL.rstrip("/") + location
    return request.build_absolute_uri(location)
