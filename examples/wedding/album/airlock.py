"""The one place this host talks to Airlock: a client with the host's service token, and its links."""

from __future__ import annotations

from urllib.parse import urljoin

from django.conf import settings

from airlock_client import Client


def airlock() -> Client:
    """A client for the host's service user in Airlock (its token never reaches a browser)."""
    return Client(settings.AIRLOCK_URL, settings.AIRLOCK_TOKEN, timeout=30.0)


def absolute(link: str) -> str:
    """Airlock's links are paths unless AIRLOCK_PUBLIC_URL is set: make them absolute for a src or href."""
    return urljoin(settings.AIRLOCK_URL + "/", link)
