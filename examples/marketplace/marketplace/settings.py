"""Settings of the marketplace example: a host application beside Airlock, not part of it.

Everything it knows about Airlock comes from the environment (runmarketplace sets it
from its options): where Airlock answers, the API token of the marketplace's service
user, and the secret Airlock signs its webhooks with.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("MARKETPLACE_DATA_DIR", HERE / "var"))
DATA_DIR.mkdir(parents=True, exist_ok=True)


def _secret_key() -> str:
    """A key of its own, made once and kept in the data directory (a demo; use a real secret store)."""
    path = DATA_DIR / "secret-key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = os.environ.get("MARKETPLACE_SECRET_KEY") or _secret_key()
DEBUG = os.environ.get("MARKETPLACE_DEBUG", "") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]"]

# Airlock, as this host sees it.
AIRLOCK_URL = os.environ.get("MARKETPLACE_AIRLOCK_URL", "http://127.0.0.1:8000").rstrip("/")
AIRLOCK_TOKEN = os.environ.get("MARKETPLACE_AIRLOCK_TOKEN", "")
AIRLOCK_WEBHOOK_SECRET = os.environ.get("MARKETPLACE_WEBHOOK_SECRET", "")
# Origins the browser sends photos to besides Airlock (the bucket's endpoint on S3), for the CSP.
UPLOAD_ORIGINS = [o for o in os.environ.get("MARKETPLACE_UPLOAD_ORIGINS", "").split(",") if o]
# How often an open draft page heartbeats its photos (Airlock keeps them 7 days a beat by default).
HEARTBEAT_SECONDS = int(os.environ.get("MARKETPLACE_HEARTBEAT_SECONDS", "60"))

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.staticfiles",
    "ads",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "ads.csp.ContentSecurityPolicyMiddleware",
]
ROOT_URLCONF = "marketplace.urls"
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
        "NAME": DATA_DIR / "marketplace.sqlite3",
        # runserver answers the page and Airlock's webhooks from several threads at once.
        "OPTIONS": {"transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;", "timeout": 20},
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
SESSION_ENGINE = "django.contrib.sessions.backends.signed_cookies"
# Cookies ignore ports: beside Airlock on the same host, Django's default names would be shared with it.
SESSION_COOKIE_NAME = "marketplace_session"
CSRF_COOKIE_NAME = "marketplace_csrftoken"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
USE_TZ = True
TIME_ZONE = "UTC"
STATIC_URL = "/static/"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"ads": {"handlers": ["console"], "level": "INFO"}},
}
