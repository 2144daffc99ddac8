"""The client address django-axes counts login failures against.

The socket's peer (REMOTE_ADDR) unless Airlock is told how many proxies it sits
behind: then the address the outermost trusted proxy saw. Taking
X-Forwarded-For at face value would let an attacker pick a fresh "IP" per
attempt; ignoring it behind a proxy would lock every user out together.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def client_ip(request: HttpRequest) -> str | None:
    hops = settings.AIRLOCK_TRUSTED_PROXY_HOPS
    if hops > 0:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")
                     if part.strip()]
        if len(forwarded) >= hops:
            return forwarded[-hops]
    return request.META.get("REMOTE_ADDR")
