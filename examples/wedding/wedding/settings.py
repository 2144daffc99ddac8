"""Settings of the wedding example: a host application beside Airlock, not part of it.

Everything it knows about Airlock comes from the environment (runwedding sets it
from its options): where Airlock answers, the API token of the host's service
user, and the secret Airlock signs its webhooks with.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("WEDDING_DATA_DIR", HERE / "var"))
DATA_DIR.mkdir(parents=True, exist_ok=True)


def _secret_key() -> str:
    """A key of its own, made once and kept in the data directory (a demo; use a real secret store)."""
    path = DATA_DIR / "secret-key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = os.environ.get("WEDDING_SECRET_KEY") or _secret_key()
DEBUG = os.environ.get("WEDDING_DEBUG", "") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]"]

# Airlock, as this host sees it.
AIRLOCK_URL = os.environ.get("WEDDING_AIRLOCK_URL", "http://127.0.0.1:8000").rstrip("/")
AIRLOCK_TOKEN = os.environ.get("WEDDING_AIRLOCK_TOKEN", "")
AIRLOCK_WEBHOOK_SECRET = os.environ.get("WEDDING_WEBHOOK_SECRET", "")
# Origins the browser loads photos and videos from besides Airlock (the bucket's endpoint on S3,
# where Airlock's signed links redirect to presigned GETs), for the CSP.
MEDIA_ORIGINS = [o for o in os.environ.get("WEDDING_MEDIA_ORIGINS", "").split(",") if o]
# How long an event's upload link stays open, in days from its creation.
LINK_DAYS = int(os.environ.get("WEDDING_LINK_DAYS", "30"))
# The profiles a link takes, comma-separated; empty: Airlock's default set for links.
LINK_PROFILES = [p for p in os.environ.get("WEDDING_LINK_PROFILES", "").split(",") if p]

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.staticfiles",
    "album",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "album.csp.ContentSecurityPolicyMiddleware",
]
ROOT_URLCONF = "wedding.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": DATA_DIR / "wedding.sqlite3",
        # runserver answers the pages and Airlock's webhooks from several threads at once.
        "OPTIONS": {"transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;", "timeout": 20},
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
SESSION_ENGINE = "django.contrib.sessions.backends.signed_cookies"
# Cookies ignore ports: beside Airlock on the same host, Django's default names would be shared with it.
SESSION_COOKIE_NAME = "wedding_session"
CSRF_COOKIE_NAME = "wedding_csrftoken"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
USE_TZ = True
TIME_ZONE = "UTC"
STATIC_URL = "/static/"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "album": {"handlers": ["console"], "level": "INFO"},
        "django.request": {"handlers": ["console"], "level": "ERROR"},
    },
}
