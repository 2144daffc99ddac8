"""The one module that reads the process environment.

Everything configurable about Airlock is an environment variable; this module
turns them into typed values so settings modules never call os.environ. A value
that is not of its type, or outside its range, stops the process at start with
ImproperlyConfigured naming the variable (never a bare ValueError mid-import).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self, TypeVar, overload

from django.core.exceptions import ImproperlyConfigured

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


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
    return default if value is None else _parse(name, value, bool)


def env_int(name: str, default: int, *, low: int | None = None, high: int | None = None) -> int:
    """An integer within [low, high] (either bound optional)."""
    value = env_optional_int(name, low=low, high=high)
    return default if value is None else value


def env_optional_int(name: str, *, low: int | None = None, high: int | None = None) -> int | None:
    """An integer within [low, high], or None when unset or empty."""
    text = env_str(name)
    return None if text is None else _parse(name, text, int, low, high)


def env_float(name: str, default: float, *, low: float | None = None, high: float | None = None) -> float:
    """A number within [low, high] (either bound optional)."""
    text = env_str(name)
    return default if text is None else _parse(name, text, float, low, high)


def _parse(label: str, text: str, kind: type, low: float | None = None, high: float | None = None) -> Any:
    """`text` as a `kind` (bool, int or float) within [low, high]; ImproperlyConfigured naming `label` otherwise."""
    if kind is bool:
        word = text.strip().lower()
        if word not in _TRUE | _FALSE:
            raise ImproperlyConfigured(f"{label} must be 1/true/yes/on or 0/false/no/off, not {text!r}")
        return word in _TRUE
    try:
        value = kind(text)
    except ValueError:
        article = "a whole number" if kind is int else "a number"
        raise ImproperlyConfigured(f"{label} must be {article}, not {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ImproperlyConfigured(f"{label} must be a finite number, not {text!r}")
    if (low is not None and value < low) or (high is not None and value > high):
        if high is None:
            raise ImproperlyConfigured(f"{label} must be at least {low}, not {value}")
        if low is None:
            raise ImproperlyConfigured(f"{label} must be at most {high}, not {value}")
        raise ImproperlyConfigured(f"{label} must be between {low} and {high}, not {value}")
    return value


@dataclass(frozen=True)
class Key:
    """One key of a grouped variable: its default, type (bool, int, float), range, and the variable it replaced."""

    default: Any
    kind: type = int
    low: float | None = None
    high: float | None = None
    was: str | None = None


# (a replaced variable that is set, where its value goes now): ops/apps.py logs each.
RENAMED_IN_USE: list[tuple[str, str]] = []
# Every grouped variable read, with its keys (docs/configuration.md documents each; a test checks).
GROUPS: dict[str, Mapping[str, Key]] = {}


def env_group(name: str, keys: Mapping[str, Key]) -> dict[str, Any]:
    """A grouped variable, `key=value` pairs separated by commas (`zip_depth=2,pdf_pages=500`).

    A key left out keeps its default. A key's former variable (`was`) is still read when
    the group does not set the key, and every process logs that it was renamed
    (ops/apps.py), so a deployment's old configuration keeps working while it moves.
    """
    GROUPS[name] = keys
    given: dict[str, str] = {}
    for item in (env_str(name) or "").split(","):
        if not item.strip():
            continue
        key, sep, value = (part.strip() for part in item.partition("="))
        if not sep or key.lower() not in keys:
            raise ImproperlyConfigured(f"{name} takes key=value pairs with the keys {', '.join(keys)}, not {item!r}")
        if key.lower() in given:
            raise ImproperlyConfigured(f"{name} sets {key.lower()} twice")
        given[key.lower()] = value
    values: dict[str, Any] = {}
    for key, spec in keys.items():
        old = env_str(spec.was) if spec.was else None
        if spec.was and old is not None:
            RENAMED_IN_USE.append((spec.was, f"{name}={key}=…"))
        if key in given:
            values[key] = _parse(f"{name} {key}", given[key], spec.kind, spec.low, spec.high)
        elif spec.was and old is not None:
            values[key] = _parse(spec.was, old, spec.kind, spec.low, spec.high)
        else:
            values[key] = spec.default
    return values


T = TypeVar("T")
G = TypeVar("G", bound="Group")
_KINDS = {"int": int, "float": float, "bool": bool}


def key(default: T, *, low: float | None = None, high: float | None = None, was: str | None = None) -> T:
    """A key of a Group: its default, range, and the variable it replaced (its type is the field's)."""
    return dataclasses.field(default=default, metadata={"low": low, "high": high, "was": was})


class Group:
    """A grouped variable's typed value, the Django setting of the same name: `settings.AIRLOCK_RETRIES.max_attempts`.

    Subclasses are frozen dataclasses whose fields are `key(...)`s; code reads the fields,
    and a test changes one with `settings.AIRLOCK_RETRIES = settings.AIRLOCK_RETRIES.replace(max_attempts=2)`.
    """

    def replace(self, **changes: Any) -> Self:
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]


def env_object(name: str, cls: type[G]) -> G:
    """The grouped variable `name` (env_group) as a `cls`, whose fields declare its keys."""
    keys = {
        field.name: Key(
            field.default,
            _KINDS[_type_name(field.type).removesuffix(" | None")],
            field.metadata["low"],
            field.metadata["high"],
            field.metadata["was"],
        )
        for field in dataclasses.fields(cls)  # type: ignore[arg-type]
    }
    return cls(**env_group(name, keys))


def _type_name(annotation: object) -> str:
    """A field's annotation as text ("int", "float | None"), whether or not its module defers annotations."""
    return annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))


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
