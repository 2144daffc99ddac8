"""The webhook address rule, one row per range (webhooks/addresses.py, docs/webhooks.md#ssrf).

Each refused row names an address in the range and the words the refusal must
carry, so a row passing for another reason (a wider range) still fails.
"""

from __future__ import annotations

import ipaddress

import pytest

from webhooks import urlguard
from webhooks.addresses import IPV4_REFUSED, IPV6_REFUSED, address_refusal

REFUSED_IPV4 = [
    ("0.1.2.3", "this network"),
    ("10.9.8.7", "private"),
    ("100.64.0.1", "shared address space"),
    ("127.0.0.2", "loopback"),
    ("169.254.10.10", "link-local"),
    ("172.31.255.254", "private"),
    ("192.0.0.9", "IETF protocol assignments"),  # IANA: globally reachable (PCP anycast); still no receiver
    ("192.0.2.10", "documentation"),
    ("192.31.196.1", "AS112"),
    ("192.52.193.1", "AMT"),
    ("192.88.99.1", "6to4 relay anycast"),
    ("192.168.0.1", "private"),
    ("192.175.48.6", "AS112 direct delegation"),
    ("198.19.0.1", "benchmarking"),
    ("198.51.100.7", "documentation"),
    ("203.0.113.9", "documentation"),
    ("239.255.255.250", "multicast"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "reserved"),
]

REFUSED_IPV6 = [
    ("::", "unspecified"),
    ("::1", "loopback"),
    ("100::1", "discard-only"),
    ("2001:2::1", "IETF protocol assignments"),  # benchmarking, inside 2001::/23
    ("2001:20::1", "IETF protocol assignments"),  # ORCHIDv2: IANA calls it reachable; refused anyway
    ("2001:db8:1::1", "documentation 2001:db8::/32"),
    ("2620:4f:8000::1", "AS112 direct delegation"),
    ("3fff:1::1", "documentation 3fff::/20"),
    ("5f00:1::1", "SRv6 SIDs"),
    ("fc00::1", "unique local"),
    ("fd12:3456::1", "unique local"),
    ("fe80::1", "link-local"),
    ("fec0::1", "site-local"),
    ("feff::1", "site-local"),
    ("ff02::1", "multicast"),
    ("4000::1", "not global unicast"),  # outside 2000::/3 and every named block
    ("e000::1", "not global unicast"),
]

# IPv6 forms carrying an IPv4 address: judged by the IPv4 they carry.
REFUSED_EMBEDDED = [
    ("::ffff:127.0.0.1", "IPv4-mapped of 127.0.0.1"),
    ("::ffff:192.88.99.1", "IPv4-mapped of 192.88.99.1"),
    ("::ffff:0:7f00:1", "SIIT of 127.0.0.1"),  # ::ffff:0:0:0/96, through a SIIT translator
    ("::ffff:0:a00:1", "SIIT of 10.0.0.1"),
    ("::ffff:0:a9fe:a9fe", "SIIT of 169.254.169.254"),
    ("64:ff9b::7f00:1", "NAT64 of 127.0.0.1"),
    ("64:ff9b::c0a8:101", "NAT64 of 192.168.1.1"),
    ("2002:7f00:1::1", "6to4 of 127.0.0.1"),
    ("2002:c0a8:101::1", "6to4 of 192.168.1.1"),
    ("2002:c058:6301::1", "6to4 of 192.88.99.1"),
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "Teredo of 127.0.0.1"),  # client 127.0.0.1, obfuscated
    ("2001:0:a00:1::1", "Teredo of 10.0.0.1"),  # the Teredo server
    ("::127.0.0.1", "IPv4-compatible of 127.0.0.1"),
]

# Forms refused even when the IPv4 they carry is public.
REFUSED_WHATEVER_THEY_CARRY = [
    ("2001:0:4136:e378:8000:63bf:f7f7:f7f7", "Teredo 2001::/32"),  # server 65.54.227.120, client 8.8.8.8
    ("::8.8.8.8", "IPv4-compatible ::/96"),
    ("64:ff9b:1::808:808", "local-use NAT64 64:ff9b:1::/48"),
    ("64:ff9b:1:808:8:808::", "local-use NAT64 64:ff9b:1::/48"),  # 8.8.8.8 at the /48 position
]

ALLOWED = [
    "8.8.8.8",
    "93.184.215.14",
    "1.1.1.1",
    "2606:4700::1111",  # Cloudflare
    "2a00:1450:4001:82b::200e",  # Google
    "2001:4860:4860::8888",  # outside 2001::/23 (2001:200::/23 and above are ordinary)
    "::ffff:8.8.8.8",
    "::ffff:0:808:808",  # SIIT to a public host
    "64:ff9b::808:808",
    "2002:808:808::1",  # 6to4 of 8.8.8.8
]


def _addr(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(text)


@pytest.mark.parametrize("address, why", REFUSED_IPV4 + REFUSED_IPV6 + REFUSED_EMBEDDED + REFUSED_WHATEVER_THEY_CARRY)
def test_each_range_is_refused_with_its_name(address, why, settings):
    refusal = address_refusal(_addr(address), private_ok=False)
    assert refusal is not None and why in refusal
    settings.AIRLOCK_WEBHOOK_ALLOW_PRIVATE = False
    with pytest.raises(urlguard.UrlRefused, match="not a public address"):
        urlguard.resolve(f"https://[{address}]/hook" if ":" in address else f"https://{address}/hook", use_cache=False)


@pytest.mark.parametrize("address", ALLOWED)
def test_global_unicast_addresses_pass(address):
    assert address_refusal(_addr(address), private_ok=False) is None


def test_every_range_in_the_tables_has_a_row():
    refused = [_addr(a) for a, _ in REFUSED_IPV4 + REFUSED_IPV6 + REFUSED_WHATEVER_THEY_CARRY]
    for network, name in IPV4_REFUSED + IPV6_REFUSED:
        assert any(a in network for a in refused), f"no test row for {name} {network}"


@pytest.mark.parametrize(
    "address, allowed",
    [
        ("::ffff:0:7f00:1", True),  # a private receiver behind SIIT, when private targets are allowed
        ("fec0::1", True),
        ("::ffff:0:a9fe:a9fe", False),  # metadata stays refused through every form
        ("2002:a9fe:a9fe::1", False),
        ("::ffff:169.254.169.254", False),
        ("169.254.170.23", False),  # EKS Pod Identity's credential agent
        ("fd00:ec2::23", False),
        ("169.254.170.2", False),  # ECS task credentials
        ("::127.0.0.1", False),  # the forms refused whatever they carry stay refused
        ("2001:0:4136:e378:8000:63bf:f7f7:f7f7", False),
    ],
)
def test_allow_private_lifts_ranges_but_not_metadata_or_refused_forms(address, allowed):
    assert (address_refusal(_addr(address), private_ok=True) is None) is allowed
