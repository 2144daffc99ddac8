"""Upload profiles, configured in settings (AIRLOCK_PROFILES)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings

from .errors import UnknownProfile


@dataclass(frozen=True)
class Profile:
    name: str
    allowed_types: tuple[str, ...]
    max_bytes: int
    processor: str | None
    derivatives: tuple[str, ...]
    single_per_owner: bool

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
        )
        for name, conf in configured.items()
    }


def get_profile(name: object) -> Profile:
    profiles = all_profiles()
    if not isinstance(name, str) or name not in profiles:
        raise UnknownProfile(details={"profile": ["Unknown profile."]})
    return profiles[name]
