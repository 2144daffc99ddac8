"""SSRF: endpoints resolving to inside addresses are refused when saved and again when delivering."""

from __future__ import annotations

import ipaddress

import pytest

from webhooks import urlguard
from webhooks.addresses import address_refusal
from webhooks.models import DeliveryStatus, WebhookAttempt, WebhookDelivery, WebhookEndpoint

from .conftest import deliver_due

INSIDE = [
    "127.0.0.1",
    "127.8.9.10",
    "10.1.2.3",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",
    "169.254.1.1",
    "100.64.0.1",
    "0.0.0.0",
    "::1",
    "fe80::1",
    "fc00::1",
    "fd00:ec2::254",
    "::ffff:127.0.0.1",
    "::ffff:10.0.0.1",
    "224.0.0.1",
]


@pytest.mark.parametrize("address", INSIDE)
def test_inside_addresses_are_refused(address, settings):
    settings.AIRLOCK_WEBHOOK_ALLOW_PRIVATE = False
    host = f"[{address}]" if ":" in address else address
    with pytest.raises(urlguard.UrlRefused, match="not a public address"):
        urlguard.resolve(f"https://{host}/hook", use_cache=False)


@pytest.mark.parametrize(
    "address", ["93.184.215.14", "2606:4700::1111", "8.8.8.8", "64:ff9b::8.8.8.8", "2002:808:808::1"]
)  # NAT64 and 6to4 to a public host
def test_public_addresses_pass(address):
    assert address_refusal(ipaddress.ip_address(address), private_ok=False) is None


# IPv6 forms that carry an IPv4 address: NAT64 and 6to4 to an inside address, and the deprecated
# IPv4-compatible form and local-use NAT64 whatever they carry (webhooks/addresses.py).
EMBEDDED = [
    "64:ff9b::127.0.0.1",
    "64:ff9b::10.0.0.1",
    "64:ff9b::a9fe:a9fe",
    "2002:7f00:1::1",
    "2002:a00:1::",
    "::127.0.0.1",
    "::10.0.0.1",
    "::8.8.8.8",
    "64:ff9b:1::8.8.8.8",
]


@pytest.mark.parametrize("address", EMBEDDED)
def test_ipv6_forms_embedding_ipv4_are_refused(address, settings):
    settings.AIRLOCK_WEBHOOK_ALLOW_PRIVATE = False
    assert address_refusal(ipaddress.ip_address(address), private_ok=False) is not None
    with pytest.raises(urlguard.UrlRefused, match="not a public address"):
        urlguard.resolve(f"https://[{address}]/hook", use_cache=False)


def test_metadata_behind_nat64_is_refused_even_when_private_is_allowed():
    assert address_refusal(ipaddress.ip_address("64:ff9b::169.254.169.254"), private_ok=True) is not None
    assert address_refusal(ipaddress.ip_address("::1"), private_ok=True) is None  # plain loopback, when allowed


def test_only_allowed_ports(settings):
    settings.AIRLOCK_WEBHOOK_ALLOW_PRIVATE = False
    for url in ("https://93.184.215.14:25/hook", "https://93.184.215.14:8443/hook", "https://93.184.215.14:80/"):
        with pytest.raises(urlguard.UrlRefused, match="port"):
            urlguard.parse(url)
    assert urlguard.parse("https://93.184.215.14/hook")[2] == 443
    assert urlguard.parse("https://93.184.215.14:443/hook")[2] == 443
    settings.AIRLOCK_WEBHOOK_ALLOWED_PORTS = [443, 8443]
    assert urlguard.parse("https://93.184.215.14:8443/hook")[2] == 8443
    with pytest.raises(urlguard.UrlRefused, match="port 25 is not allowed"):
        urlguard.parse("https://93.184.215.14:25/hook")
    settings.AIRLOCK_WEBHOOK_ALLOW_PRIVATE = True  # local receivers on any port
    assert urlguard.parse("http://127.0.0.1:8025/hook")[2] == 8025


@pytest.mark.parametrize("value, ports", [(None, [443]), ("443, 8443", [443, 8443])])
def test_the_port_setting(value, ports, monkeypatch):
    from config.settings.env import env_ports

    if value is not None:
        monkeypatch.setenv("AIRLOCK_WEBHOOK_ALLOWED_PORTS", value)
    assert env_ports("AIRLOCK_WEBHOOK_ALLOWED_PORTS", [443]) == ports


@pytest.mark.parametrize("value", ["https", "0", "70000", "443,,x"])
def test_a_bad_port_setting_stops_start_up(value, monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from config.settings.env import env_ports

    monkeypatch.setenv("AIRLOCK_WEBHOOK_ALLOWED_PORTS", value)
    with pytest.raises(ImproperlyConfigured, match="AIRLOCK_WEBHOOK_ALLOWED_PORTS"):
        env_ports("AIRLOCK_WEBHOOK_ALLOWED_PORTS", [443])


def test_a_name_that_resolves_inside_is_refused(settings):
    settings.AIRLOCK_WEBHOOK_ALLOW_PRIVATE = False
    with pytest.raises(urlguard.UrlRefused, match="localhost resolves to"):
        urlguard.resolve("https://localhost/hook", use_cache=False)


@pytest.mark.parametrize(
    "url, why",
    [
        ("http://93.184.215.14/hook", "https is required"),
        ("ftp://93.184.215.14/hook", "scheme"),
        ("https://user:pw@93.184.215.14/hook", "credentials"),
        ("https:///hook", "no host"),
        ("https://93.184.215.14/hook#frag", "fragment"),
        ("https://exa mple.com/", "not a URL"),
        ("https://93.184.215.14:99999/", "not a URL"),
    ],
)
def test_malformed_or_plain_http_urls_are_refused(url, why, settings):
    settings.AIRLOCK_WEBHOOK_ALLOW_PRIVATE = False
    with pytest.raises(urlguard.UrlRefused, match=why):
        urlguard.parse(url)


def test_the_flag_allows_private_and_http_but_never_metadata(settings):
    settings.AIRLOCK_WEBHOOK_ALLOW_PRIVATE = True
    assert urlguard.resolve("http://127.0.0.1:9/hook", use_cache=False).addresses == ("127.0.0.1",)
    with pytest.raises(urlguard.UrlRefused):
        urlguard.resolve("http://169.254.169.254/latest/meta-data/", use_cache=False)


@pytest.mark.django_db
def test_the_admin_refuses_an_inside_endpoint_when_saved(admin_client, settings):
    from attachments.models import Tenant

    settings.AIRLOCK_WEBHOOK_ALLOW_PRIVATE = False
    tenant = Tenant.objects.create(slug="acme")
    response = admin_client.post(
        "/admin/webhooks/webhookendpoint/add/",
        {"tenant": tenant.pk, "url": "https://127.0.0.1/hook", "description": "", "enabled": "on"},
    )
    assert response.status_code == 200
    assert "not a public address" in response.content.decode()
    assert not WebhookEndpoint.objects.exists()
    response = admin_client.post(
        "/admin/webhooks/webhookendpoint/add/",
        {"tenant": tenant.pk, "url": "http://93.184.215.14/hook", "description": "", "enabled": "on"},
    )
    assert "https is required" in response.content.decode() and not WebhookEndpoint.objects.exists()
    response = admin_client.post(
        "/admin/webhooks/webhookendpoint/add/",
        {"tenant": tenant.pk, "url": "https://93.184.215.14:6379/hook", "description": "", "enabled": "on"},
    )
    assert "port 6379 is not allowed" in response.content.decode() and not WebhookEndpoint.objects.exists()


@pytest.mark.django_db
def test_delivery_rechecks_and_never_connects_inside(alice, api, receiver, make_endpoint, settings):
    """An endpoint saved while private addresses were allowed (or whose DNS changed) is refused at delivery."""
    from tests.support import jpeg_bytes, run_pipeline, upload

    settings.AIRLOCK_WEBHOOK_DELIVERY = settings.AIRLOCK_WEBHOOK_DELIVERY.replace(retry_window_seconds=0.2)
    make_endpoint(receiver.url)  # saved while allowed
    settings.AIRLOCK_WEBHOOK_ALLOW_PRIVATE = False
    urlguard.forget_resolutions()
    assert run_pipeline(upload(api(alice), jpeg_bytes())) == "ready"
    deliver_due()
    assert receiver.received == []
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == DeliveryStatus.DEAD
    errors = set(WebhookAttempt.objects.values_list("error", flat=True))
    assert errors and all(e.startswith("refused: ") for e in errors)


def test_the_connection_goes_to_the_checked_address(receiver, monkeypatch):
    """The request connects to the address the check saw, whatever DNS says next; Host stays the name."""
    import socket

    from webhooks import client

    port = receiver.server.server_address[1]
    calls = []
    real = socket.getaddrinfo

    def answer(host, *args, **kwargs):
        calls.append(host)
        if host == "hooks.example.test":
            return real("127.0.0.1", *args, **kwargs)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", answer)
    target = urlguard.resolve(f"http://hooks.example.test:{port}/hooks", private_ok=True, use_cache=False)
    assert target.addresses == ("127.0.0.1",)

    def rebound(host, *args, **kwargs):  # DNS now points elsewhere: the name must not be asked again
        if host == "hooks.example.test":
            raise AssertionError(f"resolved {host} again")
        return real(host, *args, **kwargs)  # the checked address itself (a numeric lookup)

    monkeypatch.setattr(socket, "getaddrinfo", rebound)
    answer_ = client.post(target, body=b"{}", headers={"webhook-id": "msg_x"}, timeout=2)
    assert answer_.status == 204
    assert receiver.received[-1].headers["host"] == f"hooks.example.test:{port}"
