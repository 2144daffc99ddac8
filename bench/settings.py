"""Bench-only settings: the real settings plus the bare baseline views (bench/urls.py)."""

from config.settings.base import *  # noqa: F401,F403

ROOT_URLCONF = "bench.urls"
