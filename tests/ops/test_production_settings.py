"""config.settings.production: `check --deploy` is clean, and secrets come only from the environment."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

import pytest

from tests.ops.conftest import ROOT
from tests.support.env import update_env

pytestmark = pytest.mark.slow


def _production(*args: str, **env: str | dict[str, object]) -> subprocess.CompletedProcess:
    """`python args` on config.settings.production, with no DJANGO_ or metrics setting but env's."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "AIRLOCK_METRICS"))}
    return subprocess.run(  # noqa: PLW1510 - the caller checks returncode
        [sys.executable, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=update_env({**base, "DJANGO_SETTINGS_MODULE": "config.settings.production"}, env),
    )


def _manage(*args: str, **env: str | dict[str, object]) -> subprocess.CompletedProcess:
    return _production("manage.py", *args, **env)


def test_check_deploy_is_clean():
    result = _manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
        DJANGO_ALLOWED_HOSTS="airlock.example.com",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


@pytest.mark.parametrize(
    "env, complaint",
    [
        ({"DJANGO_ALLOWED_HOSTS": "airlock.example.com"}, "DJANGO_SECRET_KEY"),
        (
            {"DJANGO_SECRET_KEY": "short", "DJANGO_ALLOWED_HOSTS": "airlock.example.com"},
            "DJANGO_SECRET_KEY",
        ),
        (
            {
                "DJANGO_SECRET_KEY": "insecure-airlock-dev-key-change-me-" + "x" * 20,
                "DJANGO_ALLOWED_HOSTS": "airlock.example.com",
            },
            "DJANGO_SECRET_KEY",
        ),
        ({"DJANGO_SECRET_KEY": "PLACEHOLDER"}, "DJANGO_ALLOWED_HOSTS"),
        (
            {
                "DJANGO_SECRET_KEY": "PLACEHOLDER",
                "DJANGO_ALLOWED_HOSTS": "airlock.example.com",
                "AIRLOCK_DELIVERY_URL_SECRET": "too-short",
            },
            "AIRLOCK_DELIVERY_URL_SECRET",
        ),
        (
            {
                "DJANGO_SECRET_KEY": "PLACEHOLDER",
                "DJANGO_ALLOWED_HOSTS": "airlock.example.com",
                "AIRLOCK_DELIVERY_URL_PREVIOUS_SECRETS": "x" * 40 + ",short",
            },
            "AIRLOCK_DELIVERY_URL_SECRET",
        ),
        (
            {
                "DJANGO_SECRET_KEY": "PLACEHOLDER",
                "DJANGO_ALLOWED_HOSTS": "airlock.example.com",
                "AIRLOCK_URL_SECONDS": {"delivery": 0},
            },
            "AIRLOCK_URL_SECONDS delivery",
        ),
    ],
)
def test_production_refuses_to_start_without_its_secrets(env, complaint):
    env = {k: (secrets.token_urlsafe(50) if v == "PLACEHOLDER" else v) for k, v in env.items()}
    result = _manage("check", **env)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and complaint in result.stderr


def test_production_values():
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.DEBUG, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_SSL_REDIRECT, "
        "s.SECURE_HSTS_SECONDS >= 31536000, s.ALLOWED_HOSTS, s.SECURE_PROXY_SSL_HEADER, "
        "s.SECURE_REDIRECT_EXEMPT)"
    )
    result = _production(
        "-c", code, DJANGO_SECRET_KEY=secrets.token_urlsafe(50), DJANGO_ALLOWED_HOSTS="a.example.com,b.example.com"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        "False True True True True ['a.example.com', 'b.example.com'] ('HTTP_X_FORWARDED_PROTO', 'https') "
        "['^healthz$', '^readyz$', '^metrics$']"
    )


@pytest.mark.parametrize(
    "env, expected",
    [
        ({}, "None False False"),  # closed by default: a token, or an explicit opening
        ({"AIRLOCK_METRICS": {"open": 1, "tenant_labels": 1}}, "None True True"),
    ],
)
def test_metrics_need_a_token_or_an_opening_in_production(env, expected):
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.AIRLOCK_METRICS_TOKEN, s.AIRLOCK_METRICS.open, s.AIRLOCK_METRICS.tenant_labels)"
    )
    result = _production(
        "-c", code, DJANGO_SECRET_KEY=secrets.token_urlsafe(50), DJANGO_ALLOWED_HOSTS="a.example.com", **env
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected


def test_probes_are_not_redirected_to_https(client, settings, db):
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
    assert client.get("/healthz").status_code == 200
    assert client.get("/metrics").status_code == 200
    assert client.get("/api/v1/profiles").status_code == 301
