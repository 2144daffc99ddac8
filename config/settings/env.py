"""The one module that reads the process environment.

Everything configurable about Airlock is an environment variable; this module
turns them into typed values so settings modules never call os.environ. A value
that is not of its type, or outside its range, stops the process at start with
ImproperlyConfigured naming the variable (never a bare ValueError mid-import).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TypeVar, overload

from django.core.exceptions import ImproperlyConfigured

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
N = TypeVar("N", int, float)


@overload
def env_str(name: str, default: str) -> str: ...
@overload
def env_str(name: str, default: None = None) -> str | None: ...
def env_str(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return default if value is None or value == "" else value


def env_bool(name: str, default: bool = False) -> bool:
    """1/true/yes/on or 0/false/no/off (any case); unset or empty: the default."""
    value = env_str(name)
    if value is None:
        return default
    word = value.strip().lower()
    if word not in _TRUE | _FALSE:
        raise ImproperlyConfigured(f"{name} must be 1/true/yes/on or 0/false/no/off, not {value!r}")
    return word in _TRUE


def _in_range(name: str, value: N, low: N | None, high: N | None) -> N:
    if (low is not None and value < low) or (high is not None and value > high):
        if high is None:
            raise ImproperlyConfigured(f"{name} must be at least {low}, not {value}")
        if low is None:
            raise ImproperlyConfigured(f"{name} must be at most {high}, not {value}")
        raise ImproperlyConfigured(f"{name} must be between {low} and {high}, not {value}")
    return value


def env_int(name: str, default: int, *, low: int | None = None, high: int | None = None) -> int:
    """An integer within [low, high] (either bound optional)."""
    value = env_optional_int(name, low=low, high=high)
    return default if value is None else value


def env_optional_int(name: str, *, low: int | None = None, high: int | None = None) -> int | None:
    """An integer within [low, high], or None when unset or empty."""
    text = env_str(name)
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, not {text!r}") from None
    return _in_range(name, value, low, high)


def env_float(name: str, default: float, *, low: float | None = None, high: float | None = None) -> float:
    """A number within [low, high] (either bound optional)."""
    text = env_str(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, not {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ImproperlyConfigured(f"{name} must be a finite number, not {text!r}")
    return _in_range(name, value, low, high)


def env_list(name: str, default: list[str]) -> list[str]:
    value = env_str(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def env_ports(name: str, default: list[int]) -> list[int]:
    """A comma-separated list of TCP ports (1-65535)."""
    items = env_list(name, [str(port) for port in default])
    try:
        ports = [int(item) for item in items]
    except ValueError:
        ports = []
    if not ports or not all(0 < port < 65536 for port in ports):
        raise ImproperlyConfigured(f"{name} must list TCP ports separated by commas (e.g. 443,8443), not {items!r}")
    return ports


def env_path(name: str, default: Path) -> Path:
    value = env_str(name)
    return default if value is None else Path(value).expanduser().resolve()


def public_origin(value: str | None) -> str | None:
    """An http(s) origin (scheme, host, optional port; no path, query or fragment), without a trailing slash."""
    from urllib.parse import urlsplit

    if value is None:
        return None
    parts = urlsplit(value.strip())
    if (
        parts.scheme not in ("http", "https")
        or not parts.netloc
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
    ):
        raise ImproperlyConfigured(
            f"AIRLOCK_PUBLIC_URL must be an origin like https://files.example.com, not {value!r}"
        )
    return f"{parts.scheme}://{parts.netloc}"


def origin_host(origin: str | None) -> list[str]:
    """[the host name of an origin from public_origin()], or [] (for ALLOWED_HOSTS)."""
    from urllib.parse import urlsplit

    if origin is None:
        return []
    host = urlsplit(origin).hostname or ""
    return [f"[{host}]" if ":" in host else host] if host else []


def webhook_secrets(value: str | None, *, url: str | None) -> list[str]:
    """The global webhook endpoint's `whsec_` secrets (space-separated while rotating); required with its URL."""
    secrets = (value or "").split()
    if url and not secrets:
        raise ImproperlyConfigured("AIRLOCK_WEBHOOK_URL needs AIRLOCK_WEBHOOK_SECRET (whsec_ followed by base64)")
    from webhooks.signing import InvalidSecret, secret_key

    for secret in secrets:
        try:
            secret_key(secret)
        except InvalidSecret as exc:
            raise ImproperlyConfigured(f"AIRLOCK_WEBHOOK_SECRET: {exc}") from None
    return secrets
