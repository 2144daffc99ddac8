"""Test settings: the same environment-driven settings, tuned for speed and isolation.

Each test process gets its own database and broker namespace so several test
runs (or several engineers) can share one PostgreSQL and one Redis.
"""

import os

from .base import *  # noqa: F401,F403
from .base import (
    AIRLOCK_DATA_DIR,
    AIRLOCK_RETRIES,
    ALLOWED_HOSTS,
    CACHES,
    DATABASES,
    DRAMATIQ_BROKER,
    LOGGING,
    REDIS_URL,
)

_RUN = f"{os.getpid()}"

# Django's test client calls itself "testserver"; everything else stays loopback-only.
ALLOWED_HOSTS = [*ALLOWED_HOSTS, "testserver"]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
AIRLOCK_RETRIES = AIRLOCK_RETRIES.replace(base_seconds=0.05, max_seconds=0.2)
LOGGING["root"]["level"] = os.environ.get("AIRLOCK_LOG_LEVEL", "WARNING")

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not :memory:, so worker threads see the same database.
    AIRLOCK_DATA_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES["default"]["TEST"] = {"NAME": str(AIRLOCK_DATA_DIR / f"test-{_RUN}.sqlite3")}
else:
    DATABASES["default"]["TEST"] = {"NAME": f"test_airlock_{_RUN}"}

AIRLOCK_KEY_PREFIX = f"airlock-test-{_RUN}"

if REDIS_URL:
    DRAMATIQ_BROKER["OPTIONS"] = {**DRAMATIQ_BROKER["OPTIONS"], "namespace": f"airlock-test-{_RUN}"}
    CACHES["default"]["KEY_PREFIX"] = f"airlock-test-{_RUN}"
