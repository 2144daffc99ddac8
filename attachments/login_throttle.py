"""Login throttling around django-axes: which address counts, and a limit per address.

Axes locks a username *and* address pair after AIRLOCK_LOGIN_FAILURE_LIMIT
failures (AXES_LOCKOUT_PARAMETERS in config/settings/base.py): wrong passwords
from one address cannot lock the account's owner out elsewhere, so nobody can
lock an admin out by typing their username. Guessing across many usernames from
one address is capped separately: AIRLOCK_LOGIN_LIMITS.address_failures failures
from an address, whatever the usernames, lock that address. Axes has one
failure limit for every parameter set, and this one must be higher (many people
behind one office NAT), hence the handler below.

The address is the socket's peer (REMOTE_ADDR) unless Airlock is told how many
proxies it sits behind: then the address the outermost trusted proxy saw.
Taking X-Forwarded-For at face value would let an attacker pick a fresh "IP"
per attempt; ignoring it behind a proxy would lock every user out together.
"""

from __future__ import annotations

from typing import Any

from axes.attempts import get_cool_off_threshold
from axes.handlers.database import AxesDatabaseHandler
from axes.models import AccessAttempt
from django.conf import settings
from django.db.models import Sum
from django.http import HttpRequest


def client_ip(request: HttpRequest) -> str | None:
    hops = settings.AIRLOCK_TRUSTED_PROXY_HOPS
    if hops > 0:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
        if len(forwarded) >= hops:
            return forwarded[-hops]
    return request.META.get("REMOTE_ADDR")


def address_failures(request: Any) -> int:
    """Failed logins from this request's address within the cool-off, whatever the username."""
    address = getattr(request, "axes_ip_address", None)
    if not address:
        return 0
    attempts = AccessAttempt.objects.filter(ip_address=address)
    if settings.AXES_COOLOFF_TIME is not None:
        attempts = attempts.filter(attempt_time__gte=get_cool_off_threshold(request))
    return attempts.aggregate(n=Sum("failures_since_start"))["n"] or 0


class AddressLimitedAxesHandler(AxesDatabaseHandler):
    """Axes' database handler, with the per-address limit on top of its per (username, address) one."""

    def is_locked(self, request: Any, credentials: dict | None = None) -> bool:
        return super().is_locked(request, credentials) or _address_locked(request)

    def user_login_failed(self, sender: Any, credentials: dict, request: Any = None, **kwargs: Any) -> None:
        super().user_login_failed(sender, credentials, request, **kwargs)
        # Axes marks the request locked (its 429) only for its own parameters; the
        # address's limit answers the same way, from the failure that reaches it on.
        if request is not None and not getattr(request, "axes_locked_out", False) and _address_locked(request):
            request.axes_locked_out = True
            request.axes_credentials = credentials


def _address_locked(request: Any) -> bool:
    limit = settings.AIRLOCK_LOGIN_LIMITS.address_failures
    return limit > 0 and address_failures(request) >= limit
