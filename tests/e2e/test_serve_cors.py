"""CORS through `manage.py serve` (the production HTTP server), configured from the environment.

A preflight reaches the CORS middleware through the real server, a tus PATCH
from the allowed origin gets its headers, and a malformed origin in
AIRLOCK_CORS_ALLOWED_ORIGINS stops the process at startup with a message naming it.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys

import pytest
import requests

from tests.e2e.test_serve import ROOT
from tests.support.processes import Server

APP = "http://127.0.0.1:5173"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = Server(
        tmp_path_factory.mktemp("cors-serve"), {"AIRLOCK_CORS_ALLOWED_ORIGINS": f"{APP}, https://app.example.com"}
    )
    server.token = server.createuser("alice", "acme")
    yield server
    server.stop()


def test_preflight_and_a_tus_patch_through_serve(server):
    preflight = requests.options(
        f"{server.base}/api/v1/tus/",
        timeout=10,
        headers={
            "Origin": APP,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,tus-resumable,upload-length,upload-metadata",
        },
    )
    assert preflight.status_code == 200
    assert preflight.headers["Access-Control-Allow-Origin"] == APP
    assert "upload-metadata" in preflight.headers["Access-Control-Allow-Headers"]

    auth = {"Authorization": f"Token {server.token}", "Tus-Resumable": "1.0.0", "Origin": APP}
    meta = ",".join(
        f"{k} {base64.b64encode(v.encode()).decode()}"
        for k, v in {"profile": "media", "filename": "a.mp4", "content_type": "video/mp4"}.items()
    )
    created = requests.post(
        f"{server.base}/api/v1/tus/", timeout=10, headers={**auth, "Upload-Length": "100", "Upload-Metadata": meta}
    )
    assert created.status_code == 201, created.text
    assert created.headers["Access-Control-Allow-Origin"] == APP
    assert "Location" in created.headers["Access-Control-Expose-Headers"]
    patched = requests.patch(
        created.headers["Location"],
        data=b"x" * 10,
        timeout=10,
        headers={**auth, "Upload-Offset": "0", "Content-Type": "application/offset+octet-stream"},
    )
    assert patched.status_code == 204 and patched.headers["Upload-Offset"] == "10"
    assert patched.headers["Access-Control-Allow-Origin"] == APP

    other = requests.options(
        f"{server.base}/api/v1/uploads",
        timeout=10,
        headers={"Origin": "https://evil.example.com", "Access-Control-Request-Method": "POST"},
    )
    assert "Access-Control-Allow-Origin" not in other.headers


@pytest.mark.parametrize(
    "value,needle",
    [
        ("https://app.example.com/", "AIRLOCK_CORS_ALLOWED_ORIGINS entries must be origins"),
        ("app.example.com", "AIRLOCK_CORS_ALLOWED_ORIGINS entries must be origins"),
    ],
)
def test_a_malformed_origin_stops_the_process_at_startup(tmp_path, value, needle):
    env = {
        **os.environ,
        "AIRLOCK_DATA_DIR": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "config.settings.base",
        "AIRLOCK_CORS_ALLOWED_ORIGINS": value,
    }
    out = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode != 0
    assert needle in out.stderr and repr(value) in out.stderr


def test_a_wildcard_with_credentials_stops_the_process_at_startup(tmp_path):
    env = {
        **os.environ,
        "AIRLOCK_DATA_DIR": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "config.settings.base",
        "AIRLOCK_CORS_ALLOWED_ORIGINS": "*",
        "AIRLOCK_CORS_ALLOW_CREDENTIALS": "true",
    }
    out = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode != 0 and "AIRLOCK_CORS_ALLOW_CREDENTIALS needs an explicit" in out.stderr
