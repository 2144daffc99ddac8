"""Bench-only settings: the real settings plus the bare baseline views (bench/urls.py)."""

from config.settings.base import *  # noqa: F401,F403
from config.settings.base import ALLOWED_HOSTS

ROOT_URLCONF = "bench.urls"
# bench/api_setup.py counts queries through Django's test client, which calls itself "testserver".
ALLOWED_HOSTS = [*ALLOWED_HOSTS, "testserver"]
