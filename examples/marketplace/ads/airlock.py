"""The one place this host talks to Airlock: a client with the marketplace's service token, and its links."""

from __future__ import annotations

from urllib.parse import parse_qs, urljoin, urlsplit

from django.conf import settings

from airlock_client import Client


def airlock(*, seller: str | None = None) -> Client:
    """A client for the marketplace's service user in Airlock (its token never reaches a browser).

    `seller`: act for that seller (Airlock-Subject): Airlock then reaches only that seller's files.
    """
    return Client(settings.AIRLOCK_URL, settings.AIRLOCK_TOKEN, subject=seller, timeout=30.0)


def absolute(link: str) -> str:
    """Airlock's links are paths unless AIRLOCK_PUBLIC_URL is set: make them absolute for an <img src>."""
    return urljoin(settings.AIRLOCK_URL + "/", link)


def link_expiry(link: str) -> int:
    """The `exp` (Unix seconds) of a signed file link; 0 when it has none."""
    values = parse_qs(urlsplit(link).query).get("exp", ["0"])
    return int(values[0]) if values[0].isdigit() else 0
