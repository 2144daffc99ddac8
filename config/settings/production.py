"""Production settings: base settings plus HTTPS-only hardening; secrets only from the environment.

    DJANGO_SETTINGS_MODULE=config.settings.production
    DJANGO_SECRET_KEY=<at least 50 random characters>      (required)
    DJANGO_ALLOWED_HOSTS=airlock.example.com[,…]            (required)

`python manage.py check --deploy` is clean with these. Airlock is expected
behind a TLS-terminating proxy that sets X-Forwarded-Proto (set
AIRLOCK_TRUST_X_FORWARDED_PROTO=0 when Django itself sees the TLS
connection). The probes (/healthz, /readyz, /metrics) are exempt from the
HTTPS redirect: orchestrators and Prometheus usually call them over plain HTTP
inside the cluster.
"""

import os
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured

from .env import Group, env_list, env_object, env_str, key

# Checked before the base settings load: without a key they would make one in
# the data directory, and production keys come only from the environment.
SECRET_KEY = env_str("DJANGO_SECRET_KEY")
if not SECRET_KEY or SECRET_KEY.startswith("insecure-") or len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5:
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY must be set to at least 50 random characters in production "
        "(e.g. python -c 'import secrets; print(secrets.token_urlsafe(50))')."
    )

# Decoder jobs run with every confinement layer or not at all unless the operator names the
# layers to go without (base.py's embedded default accepts the root-only ones).
os.environ.setdefault("AIRLOCK_SANDBOX_ACCEPT_MISSING", "")

from .base import *  # noqa: E402, F403
from .base import _METRICS_GIVEN  # noqa: E402  (AIRLOCK_METRICS as given, read once)

DEBUG = False

ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", [])
if not ALLOWED_HOSTS:
    raise ImproperlyConfigured("DJANGO_ALLOWED_HOSTS must list the host names Airlock is served under.")


# --- HTTPS ---------------------------------------------------------------------
# trust_forwarded_proto: trust the proxy's X-Forwarded-Proto (off when Django itself sees the
# TLS connection); redirect: plain HTTP to HTTPS; hsts_*: the Strict-Transport-Security header.
@dataclass(frozen=True)
class Https(Group):
    trust_forwarded_proto: bool = key(True, was="AIRLOCK_TRUST_X_FORWARDED_PROTO")
    redirect: bool = key(True, was="AIRLOCK_SSL_REDIRECT")
    hsts_seconds: int = key(365 * 86400, low=0, was="AIRLOCK_HSTS_SECONDS")
    hsts_include_subdomains: bool = key(True, was="AIRLOCK_HSTS_INCLUDE_SUBDOMAINS")
    hsts_preload: bool = key(True, was="AIRLOCK_HSTS_PRELOAD")


AIRLOCK_HTTPS = env_object("AIRLOCK_HTTPS", Https)
if AIRLOCK_HTTPS.trust_forwarded_proto:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = AIRLOCK_HTTPS.redirect
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SECURE_HSTS_SECONDS = AIRLOCK_HTTPS.hsts_seconds
SECURE_HSTS_INCLUDE_SUBDOMAINS = AIRLOCK_HTTPS.hsts_include_subdomains
SECURE_HSTS_PRELOAD = AIRLOCK_HTTPS.hsts_preload

# --- Cookies and headers ---------------------------------------------------------
SESSION_COOKIE_SECURE = True
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SECURE = True
CSRF_COOKIE_HTTPONLY = True
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

# Browsers may post forms only from these origins (the admin, the demo page).
CSRF_TRUSTED_ORIGINS = env_list(
    "DJANGO_CSRF_TRUSTED_ORIGINS",
    [f"https://{host}" for host in ALLOWED_HOSTS if not host.startswith(".")],
)

# /metrics needs AIRLOCK_METRICS_TOKEN (a bearer token); without one it answers 404,
# unless AIRLOCK_METRICS=open=1 says only the scraper can reach it (a separate
# network, a proxy that does not route /metrics from outside).
AIRLOCK_METRICS_TOKEN = env_str("AIRLOCK_METRICS_TOKEN")
AIRLOCK_METRICS = _METRICS_GIVEN.replace(open=_METRICS_GIVEN.open is True)
