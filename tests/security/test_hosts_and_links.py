"""Only loopback names are ours on the embedded default; AIRLOCK_PUBLIC_URL, not Host, makes absolute URLs."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.settings.env import public_origin
from tests.support import create_intent, jpeg_bytes, upload


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "127.0.0.1.evil.example"])
def test_a_foreign_host_is_refused(alice, api, host):
    response = api(alice).post(
        "/api/v1/uploads",
        {"profile": "image", "filename": "a.jpg", "size": 10, "content_type": "image/jpeg"},
        format="json",
        HTTP_HOST=host,
    )
    assert response.status_code == 400


@pytest.mark.parametrize("host", ["127.0.0.1:8000", "localhost", "localhost:9000", "[::1]:8000"])
def test_loopback_names_are_served_and_name_the_upload_url(alice, api, host):
    response = api(alice).post(
        "/api/v1/uploads",
        {"profile": "image", "filename": "a.jpg", "size": 10, "content_type": "image/jpeg"},
        format="json",
        HTTP_HOST=host,
    )
    assert response.status_code == 201
    assert response.json()["upload"]["url"].startswith(f"http://{host}/api/v1/uploads/")


def test_public_url_mints_every_absolute_url(alice, api, settings):
    settings.AIRLOCK_PUBLIC_URL = "https://files.example.com"
    client = api(alice)
    intent = create_intent(client, size=10).json()
    assert intent["upload"]["url"].startswith("https://files.example.com/api/v1/uploads/")
    upload(client, jpeg_bytes())
    upload(client, jpeg_bytes())
    listed = client.get("/api/v1/attachments?limit=1", HTTP_HOST="localhost").json()
    assert listed["next"].startswith("https://files.example.com/api/v1/attachments?")
    assert listed["results"][0]["links"]["self"].startswith("https://files.example.com/api/v1/attachments/")


@pytest.mark.parametrize(
    "value", ["files.example.com", "ftp://files.example.com", "https://x.example/airlock", "https://x.example/?a=1"]
)
def test_public_url_must_be_an_origin(value):
    with pytest.raises(ImproperlyConfigured):
        public_origin(value)


def test_public_url_is_normalized():
    assert public_origin("https://files.example.com/") == "https://files.example.com"
    assert public_origin(None) is None


def test_the_public_urls_host_is_allowed_by_default(tmp_path):
    """The embedded default behind a proxy that passes the public Host: served without more settings."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_") and k != "DATABASE_URL"}
    env.update(
        AIRLOCK_DATA_DIR=str(tmp_path),
        DJANGO_SETTINGS_MODULE="config.settings.base",
        AIRLOCK_PUBLIC_URL="https://files.example.com:8443/",
    )
    code = "import django; django.setup(); from django.conf import settings as s; print(s.ALLOWED_HOSTS)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['127.0.0.1', 'localhost', '[::1]', 'files.example.com']"
