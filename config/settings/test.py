"""Test settings: the same environment-driven settings, tuned for speed."""

from .base import *  # noqa: F401,F403
from .base import LOGGING

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
AIRLOCK_RETRY_BASE_SECONDS = 0.05
AIRLOCK_RETRY_MAX_SECONDS = 0.2
LOGGING["root"]["level"] = "WARNING"
