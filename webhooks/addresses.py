"""Which IP addresses a webhook may connect to: public unicast only, whatever form the address takes.

IPv4: every address outside the IANA special-purpose blocks, multicast and
the reserved 240/4. The whole blocks go, also the parts IANA calls globally
reachable (anycast DNS sinks, the deprecated 6to4 relay, 192.0.0.0/24's
anycast services): no webhook receiver lives there.

IPv6: global unicast (2000::/3) minus its special-purpose blocks. Forms that
carry an IPv4 address are judged by it first, so no form reaches an inside
IPv4 host: IPv4-mapped (::ffff:a.b.c.d), SIIT IPv4-translated
(::ffff:0:a.b.c.d: ::ffff:0:7f00:1 is 127.0.0.1 through a translator),
well-known NAT64 (64:ff9b::a.b.c.d) and 6to4 (2002:aabb:ccdd::) then pass when
their IPv4 passes. IPv4-compatible (::a.b.c.d, deprecated) and Teredo
(2001::/32: server, and the client under its obfuscation) are refused even
then: neither is routed to its IPv4 host by an ordinary network.
Local-use NAT64 (64:ff9b:1::/48) is refused whatever it carries: where the
IPv4 sits depends on a prefix length only its operator knows.

Python's own `is_global` is not relied upon: on 3.11 it calls fec0::/10,
::ffff:0:0:0/96, 3fff::/20 and 192.88.99.0/24 global.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import NamedTuple

IPv4 = ipaddress.IPv4Address
IPv6 = ipaddress.IPv6Address
Address = IPv4 | IPv6

# Instance metadata and credential services (AWS, GCP, Azure: 169.254.169.254; AWS IPv6; ECS task
# credentials; EKS Pod Identity, IPv4 and IPv6; Alibaba Cloud). Never a webhook target, whatever the flag says.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "fd00:ec2::254", "169.254.170.2", "169.254.170.23", "fd00:ec2::23", "100.100.100.200")
)


def _table(*rows: tuple[str, str]) -> tuple[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str], ...]:
    return tuple((ipaddress.ip_network(network), name) for network, name in rows)


IPV4_REFUSED = _table(
    ("0.0.0.0/8", "this network"),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "shared address space"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "IETF protocol assignments"),
    ("192.0.2.0/24", "documentation"),
    ("192.31.196.0/24", "AS112"),
    ("192.52.193.0/24", "AMT"),
    ("192.88.99.0/24", "6to4 relay anycast"),
    ("192.168.0.0/16", "private"),
    ("192.175.48.0/24", "AS112 direct delegation"),
    ("198.18.0.0/15", "benchmarking"),
    ("198.51.100.0/24", "documentation"),
    ("203.0.113.0/24", "documentation"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),  # with 255.255.255.255
)

GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")
# Named for the refusal message; every one outside 2000::/3 would be refused anyway.
IPV6_REFUSED = _table(
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("64:ff9b:1::/48", "local-use NAT64"),
    ("100::/64", "discard-only"),
    ("2001::/23", "IETF protocol assignments"),
    ("2001:db8::/32", "documentation"),
    ("2620:4f:8000::/48", "AS112 direct delegation"),
    ("3fff::/20", "documentation"),
    ("5f00::/16", "SRv6 SIDs"),
    ("fc00::/7", "unique local"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local"),
    ("ff00::/8", "multicast"),
)


def _low32(address: IPv6) -> tuple[IPv4, ...]:
    return (IPv4(int(address) & 0xFFFF_FFFF),)


def _sixtofour(address: IPv6) -> tuple[IPv4, ...]:
    return (IPv4((int(address) >> 80) & 0xFFFF_FFFF),)


def _unreadable(address: IPv6) -> tuple[IPv4, ...]:
    return ()


def _teredo(address: IPv6) -> tuple[IPv4, ...]:
    server = IPv4((int(address) >> 64) & 0xFFFF_FFFF)
    client = IPv4(~int(address) & 0xFFFF_FFFF)  # stored inverted ("obfuscated")
    return (server, client)


class Form(NamedTuple):
    network: ipaddress.IPv6Network
    name: str
    carried: Callable[[IPv6], tuple[IPv4, ...]]
    passes: bool  # may pass when its IPv4 does (False: refused even then)


EMBEDDING_FORMS = (
    Form(ipaddress.IPv6Network("::ffff:0:0/96"), "IPv4-mapped", _low32, True),
    Form(ipaddress.IPv6Network("::ffff:0:0:0/96"), "SIIT", _low32, True),
    Form(ipaddress.IPv6Network("64:ff9b::/96"), "NAT64", _low32, True),
    Form(ipaddress.IPv6Network("2002::/16"), "6to4", _sixtofour, True),
    Form(ipaddress.IPv6Network("2001::/32"), "Teredo", _teredo, False),
    Form(ipaddress.IPv6Network("::/96"), "IPv4-compatible", _low32, False),
    Form(ipaddress.IPv6Network("64:ff9b:1::/48"), "local-use NAT64", _unreadable, False),
)
# Inside ::/96 but the IPv6 unspecified and loopback addresses, not IPv4-compatible ones.
_NOT_EMBEDDING = frozenset(IPv6(a) for a in ("::", "::1"))


def _ipv4_refusal(address: IPv4) -> str | None:
    for network, name in IPV4_REFUSED:
        if address in network:
            return f"{name} {network}"
    return None


def _ipv6_refusal(address: IPv6) -> str | None:
    for network, name in IPV6_REFUSED:
        if address in network:
            return f"{name} {network}"
    if address not in GLOBAL_UNICAST:
        return "not global unicast (2000::/3)"
    return None


def embedding_form(address: IPv6) -> Form | None:
    """The form in which `address` carries an IPv4 address, if it does."""
    if address in _NOT_EMBEDDING:
        return None
    return next((form for form in EMBEDDING_FORMS if address in form.network), None)


def address_refusal(address: Address, *, private_ok: bool) -> str | None:
    """Why `address` may not be a webhook target, or None when it may.

    `private_ok` (AIRLOCK_WEBHOOK_ALLOW_PRIVATE) lifts every rule but two: cloud
    metadata addresses, however written, and the IPv6 forms refused whatever
    they carry.
    """
    if isinstance(address, IPv6):
        form = embedding_form(address)
        if form is not None:
            for carried in form.carried(address):
                why = address_refusal(carried, private_ok=private_ok)
                if why is not None:
                    return f"{form.name} of {carried}: {why}"
            return None if form.passes else f"{form.name} {form.network}"
    if address in METADATA_ADDRESSES:
        return "cloud metadata"
    if private_ok:
        return None
    return _ipv4_refusal(address) if isinstance(address, IPv4) else _ipv6_refusal(address)
