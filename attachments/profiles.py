"""Upload profiles, configured in settings (AIRLOCK_PROFILES)."""

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
    # What a file with the same bytes as an earlier available one gets (services/duplicates.py):
    # "flag" (ready, with `duplicate_of`) or "reject" (rejected/duplicate).
    duplicates: str = "flag"

    @property
    def rejects_duplicates(self) -> bool:
        return self.duplicates == "reject"

    def allows(self, content_type: str | None) -> bool:
        return content_type is not None and content_type in self.allowed_types


def all_profiles() -> dict[str, Profile]:
    configured: dict[str, dict[str, Any]] = settings.AIRLOCK_PROFILES
    return {
        name: Profile(
            name=name,
            allowed_types=tuple(conf["allowed_types"]),
            max_bytes=int(conf["max_bytes"]),
            processor=conf.get("processor"),
            derivatives=tuple(conf.get("derivatives", ())),
            single_per_owner=bool(conf.get("single_per_owner", False)),
            duplicates=_duplicates(name, conf.get("duplicates", "flag")),
        )
        for name, conf in configured.items()
    }


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
