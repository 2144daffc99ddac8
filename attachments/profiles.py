"""Upload profiles, configured in settings (AIRLOCK_PROFILES).

A profile either names one processor for all its types, or holds `kinds`: each a set of
types with its own limit, processor and derivatives (the camera profile: photos go the
image path, videos the media path). The type found in the bytes picks the kind; before the
bytes are read, the profile's own `max_bytes` is the largest of its kinds'.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from .errors import UnknownProfile


@dataclass(frozen=True)
class Profile:
    name: str
    allowed_types: tuple[str, ...]
    max_bytes: int
    processor: str | None
    derivatives: tuple[str, ...]
    single_per_owner: bool
    kind: str = ""  # the kind's name, for a kind of a profile with kinds
    kinds: tuple[Profile, ...] = ()
    # What a file with the same bytes as an earlier available one gets (services/duplicates.py):
    # "flag" (ready, with `duplicate_of`) or "reject" (rejected/duplicate).
    duplicates: str = "flag"

    @property
    def rejects_duplicates(self) -> bool:
        return self.duplicates == "reject"

    def allows(self, content_type: str | None) -> bool:
        return content_type is not None and content_type in self.allowed_types

    def for_type(self, content_type: str | None) -> Profile:
        """What processes a file of this type: the kind that allows it, else the profile itself."""
        return next((k for k in self.kinds if k.allows(content_type)), self)


def _profile(name: str, conf: dict[str, Any]) -> Profile:
    single = bool(conf.get("single_per_owner", False))
    duplicates = _duplicates(name, conf.get("duplicates", "flag"))
    kinds = tuple(
        Profile(
            name=name,
            kind=kind,
            allowed_types=tuple(part["allowed_types"]),
            max_bytes=int(part["max_bytes"]),
            processor=part.get("processor"),
            derivatives=tuple(part.get("derivatives", ())),
            single_per_owner=single,
            duplicates=duplicates,
        )
        for kind, part in conf.get("kinds", {}).items()
    )
    if kinds:
        return Profile(
            name=name,
            allowed_types=tuple(t for k in kinds for t in k.allowed_types),
            max_bytes=max(k.max_bytes for k in kinds),
            processor=None,
            derivatives=tuple(dict.fromkeys(d for k in kinds for d in k.derivatives)),
            single_per_owner=single,
            duplicates=duplicates,
            kinds=kinds,
        )
    return Profile(
        name=name,
        allowed_types=tuple(conf["allowed_types"]),
        max_bytes=int(conf["max_bytes"]),
        processor=conf.get("processor"),
        derivatives=tuple(conf.get("derivatives", ())),
        single_per_owner=single,
        duplicates=duplicates,
    )


def all_profiles() -> dict[str, Profile]:
    configured: dict[str, dict[str, Any]] = settings.AIRLOCK_PROFILES
    return {name: _profile(name, conf) for name, conf in configured.items()}


DUPLICATE_POLICIES = ("flag", "reject")


def _duplicates(name: str, value: object) -> str:
    if value not in DUPLICATE_POLICIES:
        raise ImproperlyConfigured(f"AIRLOCK_PROFILES[{name!r}]['duplicates'] must be one of {DUPLICATE_POLICIES}")
    return str(value)


def get_profile(name: object) -> Profile:
    profiles = all_profiles()
    if not isinstance(name, str) or name not in profiles:
        raise UnknownProfile(details={"profile": ["Unknown profile."]})
    return profiles[name]
