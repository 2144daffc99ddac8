"""Where a webhook may go: public addresses over https (SSRF), checked when saved and at every delivery.

An endpoint URL is refused when its host resolves to a loopback, private,
link-local, shared, reserved or multicast address, unless
AIRLOCK_WEBHOOK_ALLOW_PRIVATE is set (which also allows plain http). Cloud
metadata addresses are refused even then. Every address the name resolves to
must pass (a name with one public and one private address is refused), and the
delivery connects to an address it checked, so a DNS answer that changes between
the check and the connection cannot move the request inside.

Which addresses are public, and how IPv6 forms that carry an IPv4 address
are judged, is webhooks/addresses.py.

The port must be one of AIRLOCK_WEBHOOK_ALLOWED_PORTS (443 by default), so a
public host cannot be used to reach its other services (SMTP, databases);
AIRLOCK_WEBHOOK_ALLOW_PRIVATE lifts this rule too (local test receivers).
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from .addresses import address_refusal

# Resolutions are reused this long, so a burst to one host does not query DNS per event.
RESOLVE_CACHE_SECONDS = 10.0


class UrlRefused(ValueError):
    """The URL may not be a webhook target; the message says why."""


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str  # as written in the URL (the Host header, TLS name)
    port: int
    path: str  # path and query
    addresses: tuple[str, ...]  # checked, in resolver order

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


def allow_private() -> bool:
    return bool(settings.AIRLOCK_WEBHOOK_ALLOW_PRIVATE)


def allowed_ports() -> frozenset[int]:
    return frozenset(settings.AIRLOCK_WEBHOOK_ALLOWED_PORTS)


def parse(url: str, *, private_ok: bool | None = None) -> tuple[str, str, int, str]:
    """(scheme, host, port, path) of an acceptable URL, before any DNS; UrlRefused otherwise."""
    private_ok = allow_private() if private_ok is None else private_ok
    if not isinstance(url, str) or not url or len(url) > 2000 or any(c.isspace() for c in url):
        raise UrlRefused("not a URL")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise UrlRefused("not a URL") from None
    if parts.scheme not in ("https", "http"):
        raise UrlRefused("the scheme must be https")
    if parts.scheme == "http" and not private_ok:
        raise UrlRefused("https is required (AIRLOCK_WEBHOOK_ALLOW_PRIVATE allows http)")
    if parts.username is not None or parts.password is not None:
        raise UrlRefused("credentials in the URL are not supported")
    if not parts.hostname:
        raise UrlRefused("the URL has no host")
    if parts.fragment:
        raise UrlRefused("the URL has a fragment")
    port = port or (443 if parts.scheme == "https" else 80)
    if not private_ok and port not in allowed_ports():
        allowed = ", ".join(str(p) for p in sorted(allowed_ports()))
        raise UrlRefused(f"port {port} is not allowed (allowed: {allowed}; see AIRLOCK_WEBHOOK_ALLOWED_PORTS)")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.scheme, parts.hostname, port, path


_resolved: dict[tuple[str, int, bool], tuple[float, tuple[str, ...]]] = {}
_resolved_lock = threading.Lock()


def resolve(url: str, *, private_ok: bool | None = None, use_cache: bool = True) -> Target:
    """The URL with every address its host resolves to, all of them checked; UrlRefused otherwise."""
    private_ok = allow_private() if private_ok is None else private_ok
    scheme, host, port, path = parse(url, private_ok=private_ok)
    key = (host, port, private_ok)
    now = time.monotonic()
    with _resolved_lock:
        hit = _resolved.get(key) if use_cache else None
    if hit is not None and now - hit[0] < RESOLVE_CACHE_SECONDS:
        return Target(scheme, host, port, path, hit[1])
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise UrlRefused(f"{host} does not resolve ({exc})") from None
    addresses = tuple(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise UrlRefused(f"{host} does not resolve")
    for raw in addresses:
        address = ipaddress.ip_address(raw.split("%", 1)[0])
        why = address_refusal(address, private_ok=private_ok)
        if why is not None:
            raise UrlRefused(f"{host} resolves to {address}, which is not a public address ({why})")
    with _resolved_lock:
        if len(_resolved) > 1000:
            _resolved.clear()
        _resolved[key] = (now, addresses)
    return Target(scheme, host, port, path, addresses)


def forget_resolutions() -> None:
    with _resolved_lock:
        _resolved.clear()
