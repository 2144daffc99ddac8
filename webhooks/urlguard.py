"""Where a webhook may go: public addresses over https (SSRF), checked when saved and at every delivery.

An endpoint URL is refused when its host resolves to a loopback, private,
link-local, shared, reserved or multicast address, unless
AIRLOCK_WEBHOOK_ALLOW_PRIVATE is set (which also allows plain http). Cloud
metadata addresses are refused even then. Every address the name resolves to
must pass (a name with one public and one private address is refused), and the
delivery connects to an address it checked, so a DNS answer that changes between
the check and the connection cannot move the request inside.

IPv6 addresses that carry an IPv4 one are judged by where they lead: an
IPv4-mapped address (::ffff:a.b.c.d) and a NAT64 one (64:ff9b::a.b.c.d, what
DNS64 answers for an IPv4-only host on an IPv6-only network) pass only when
their IPv4 address would. The deprecated forms, 6to4 (2002::/16) and
IPv4-compatible (::a.b.c.d), and local-use NAT64 (64:ff9b:1::/48, a translator
inside the network) are refused whatever they carry.

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

# Instance metadata services (AWS, GCP, Azure: 169.254.169.254; AWS IPv6; ECS task
# credentials; Alibaba Cloud). Never a webhook target, whatever the flag says.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",
        "fd00:ec2::254",
        "169.254.170.2",
        "100.100.100.200",
    )
)
NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052: the IPv4 address is the last 32 bits
# Never a webhook target: 6to4 (RFC 3056, deprecated by RFC 7526), IPv4-compatible
# (RFC 4291, deprecated) and local-use NAT64 (RFC 8215). :: and ::1 lie in ::/96 but
# are the IPv6 unspecified and loopback addresses: the usual rule judges them.
EMBEDDING_REFUSED = tuple(ipaddress.ip_network(n) for n in ("2002::/16", "::/96", "64:ff9b:1::/48"))
_NOT_EMBEDDING = frozenset(ipaddress.IPv6Address(a) for a in ("::", "::1"))
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


def address_allowed(address: ipaddress.IPv4Address | ipaddress.IPv6Address, *, private_ok: bool) -> bool:
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        elif address in NAT64:
            address = ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)
        elif address not in _NOT_EMBEDDING and any(address in network for network in EMBEDDING_REFUSED):
            return False
    if address in METADATA_ADDRESSES:
        return False
    if private_ok:
        return True
    # is_global is False for loopback, RFC 1918, link-local, CGNAT (100.64/10), ULA,
    # documentation, reserved and unspecified addresses.
    return address.is_global and not address.is_multicast


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
        if not address_allowed(address, private_ok=private_ok):
            raise UrlRefused(f"{host} resolves to {address}, which is not a public address")
    with _resolved_lock:
        if len(_resolved) > 1000:
            _resolved.clear()
        _resolved[key] = (now, addresses)
    return Target(scheme, host, port, path, addresses)


def forget_resolutions() -> None:
    with _resolved_lock:
        _resolved.clear()
