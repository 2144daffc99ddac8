"""CORS for the API and tus (django-cors-headers, config/settings/cors.py).

Preflights are answered before authentication, body reading and rate limits;
allowed origins get the headers clients need exposed; any other origin, or the
default empty list, gets no CORS header at all. The same in a real browser is
tests/browser/test_cors_browser.py.
"""

from __future__ import annotations

import base64

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.settings.cors import cors_origins, cors_settings

APP = "https://app.example.com"
TUS = {"HTTP_TUS_RESUMABLE": "1.0.0"}


@pytest.fixture
def cors(settings):
    for name, value in cors_settings([APP], allow_credentials=False).items():
        setattr(settings, name, value)
    return settings


def _preflight(client, path: str, method: str, headers: str = ""):
    extra = {"HTTP_ORIGIN": APP, "HTTP_ACCESS_CONTROL_REQUEST_METHOD": method}
    if headers:
        extra["HTTP_ACCESS_CONTROL_REQUEST_HEADERS"] = headers
    return client.options(path, **extra)


def _allowed(response, method: str, headers: str) -> None:
    assert response["Access-Control-Allow-Origin"] == APP
    assert method in response["Access-Control-Allow-Methods"].split(", ")
    allowed = {h.strip().lower() for h in response["Access-Control-Allow-Headers"].split(",")}
    assert {h.strip().lower() for h in headers.split(",")} <= allowed
    assert "Access-Control-Allow-Credentials" not in response
    assert response["Access-Control-Max-Age"] == "86400"


def _exposed(response) -> set[str]:
    return {h.strip().lower() for h in response["Access-Control-Expose-Headers"].split(",")}


@pytest.mark.django_db
def test_preflight_for_an_intent_post_needs_no_credentials(cors, api, settings):
    # a preflight is never rate limited
    settings.AIRLOCK_RATE_LIMITS = settings.AIRLOCK_RATE_LIMITS.replace(intents_per_minute=0)
    response = _preflight(api(), "/api/v1/uploads", "POST", "authorization,content-type,x-request-id")
    assert response.status_code == 200
    _allowed(response, "POST", "authorization,content-type,x-request-id")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "method,headers",
    [
        ("POST", "authorization,tus-resumable,upload-length,upload-metadata,upload-defer-length,upload-concat"),
        ("PATCH", "authorization,tus-resumable,upload-offset,upload-checksum,content-type"),
        ("HEAD", "authorization,tus-resumable"),
        ("DELETE", "authorization,tus-resumable"),
    ],
)
def test_preflight_for_tus_allows_its_headers(cors, api, method, headers):
    path = "/api/v1/tus/" if method == "POST" else "/api/v1/tus/00000000-0000-0000-0000-000000000000"
    response = _preflight(api(), path, method, headers)
    assert response.status_code == 200
    _allowed(response, method, headers)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "method"),
    [
        ("/api/v1/uploads", "POST"),
        ("/api/v1/attachments/heartbeat", "POST"),
        ("/api/v1/attachments/discard-all", "POST"),
        ("/api/v1/attachments/commit", "POST"),
        ("/api/v1/attachments/00000000-0000-0000-0000-000000000000", "GET"),
        ("/api/v1/attachments/00000000-0000-0000-0000-000000000000/download", "GET"),
        ("/api/v1/tus/", "POST"),
    ],
)
def test_preflight_for_a_client_tokens_calls_allows_authorization_and_the_subject(cors, api, path, method):
    headers = "authorization,airlock-subject,content-type"
    response = _preflight(api(), path, method, headers)
    assert response.status_code == 200
    _allowed(response, method, headers)


@pytest.mark.django_db
def test_a_client_tokens_answer_and_its_refusal_carry_cors_headers(cors, alice):
    from rest_framework.test import APIClient

    from attachments.client_tokens.services.client_tokens import client_token_issue

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {client_token_issue(user=alice, subject='s-1', ttl_seconds=60).key}")
    created = client.post(
        "/api/v1/uploads",
        {"profile": "image", "filename": "cat.jpg", "size": 100, "content_type": "image/jpeg"},
        format="json",
        HTTP_ORIGIN=APP,
    )
    assert created.status_code == 201 and created["Access-Control-Allow-Origin"] == APP
    refused = client.get("/api/v1/usage", HTTP_ORIGIN=APP)
    assert refused.status_code == 403 and refused["Access-Control-Allow-Origin"] == APP


@pytest.mark.django_db
def test_method_override_header_is_allowed(cors, api):
    response = _preflight(api(), "/api/v1/tus/x", "POST", "x-http-method-override,tus-resumable,upload-offset")
    _allowed(response, "POST", "x-http-method-override,tus-resumable,upload-offset")


@pytest.mark.django_db
def test_tus_answers_with_its_headers_readable_by_the_app(cors, api, alice):
    meta = ",".join(
        f"{k} {base64.b64encode(v.encode()).decode()}"
        for k, v in {"profile": "image", "filename": "cat.jpg", "content_type": "image/jpeg"}.items()
    )
    client = api(alice)
    created = client.post("/api/v1/tus/", HTTP_ORIGIN=APP, **TUS, HTTP_UPLOAD_LENGTH="10", HTTP_UPLOAD_METADATA=meta)
    assert created.status_code == 201
    assert created["Access-Control-Allow-Origin"] == APP
    assert {"location", "upload-expires", "tus-resumable"} <= _exposed(created)
    path = created["Location"].removeprefix("http://testserver")
    patched = client.generic(
        "PATCH",
        path,
        b"01234",
        content_type="application/offset+octet-stream",
        HTTP_ORIGIN=APP,
        **TUS,
        HTTP_UPLOAD_OFFSET="0",
    )
    assert patched.status_code == 204 and patched["Upload-Offset"] == "5"
    assert patched["Access-Control-Allow-Origin"] == APP
    assert {"upload-offset", "upload-expires"} <= _exposed(patched)
    head = client.head(path, HTTP_ORIGIN=APP, **TUS)
    assert head["Upload-Length"] == "10" and head["Access-Control-Allow-Origin"] == APP
    assert {"upload-offset", "upload-length", "upload-metadata"} <= _exposed(head)


@pytest.mark.django_db
def test_tus_options_without_an_origin_is_still_the_tus_answer(cors, api):
    response = api().options("/api/v1/tus/")
    assert response.status_code == 204
    assert response["Tus-Version"] == "1.0.0" and "checksum" in response["Tus-Extension"]
    assert "Access-Control-Allow-Origin" not in response


@pytest.mark.django_db
def test_tus_options_with_an_origin_but_no_preflight_gets_tus_and_cors_headers(cors, api):
    response = api().options("/api/v1/tus/", HTTP_ORIGIN=APP)
    assert response.status_code == 204 and response["Tus-Version"] == "1.0.0"
    assert response["Access-Control-Allow-Origin"] == APP
    assert {"tus-version", "tus-max-size", "tus-extension", "tus-checksum-algorithm"} <= _exposed(response)


@pytest.mark.django_db
def test_status_get_exposes_airlock_wait_etag_retry_after(cors, api, alice, settings):
    client = api(alice)
    created = client.post(
        "/api/v1/uploads",
        {"profile": "image", "filename": "cat.jpg", "size": 100, "content_type": "image/jpeg"},
        format="json",
        HTTP_ORIGIN=APP,
    )
    assert created.status_code == 201 and created["Access-Control-Allow-Origin"] == APP
    # every wait is skipped: the header is there to read
    settings.AIRLOCK_HTTP_LIMITS = settings.AIRLOCK_HTTP_LIMITS.replace(waiters_per_user=0)
    status = client.get(f"/api/v1/attachments/{created.json()['id']}?wait=5", HTTP_ORIGIN=APP)
    assert status.status_code == 200 and status["Airlock-Wait"].startswith("skipped")
    assert status["Access-Control-Allow-Origin"] == APP
    assert {"airlock-wait", "etag", "retry-after", "x-request-id", "location"} <= _exposed(status)


@pytest.mark.django_db
def test_an_error_answer_carries_cors_headers_too(cors, api):
    response = api().get("/api/v1/attachments", HTTP_ORIGIN=APP)
    assert response.status_code == 401 and response["Access-Control-Allow-Origin"] == APP
    assert "www-authenticate" in _exposed(response)


@pytest.mark.django_db
def test_a_disallowed_origin_gets_no_cors_headers(cors, api, alice):
    response = api().options(
        "/api/v1/uploads", HTTP_ORIGIN="https://evil.example.com", HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST"
    )
    assert response.status_code == 200  # answered, but with nothing that lets the browser go on
    assert not [h for h in response.headers if h.lower().startswith("access-control-")]
    got = api(alice).get("/api/v1/attachments", HTTP_ORIGIN="https://evil.example.com")
    assert got.status_code == 200
    assert not [h for h in got.headers if h.lower().startswith("access-control-")]


@pytest.mark.django_db
def test_by_default_no_origin_gets_cors_headers(api, alice, settings):
    assert settings.CORS_ALLOWED_ORIGINS == [] and settings.CORS_ALLOW_ALL_ORIGINS is False
    response = _preflight(api(), "/api/v1/uploads", "POST", "authorization,content-type")
    assert not [h for h in response.headers if h.lower().startswith("access-control-")]
    got = api(alice).get("/api/v1/attachments", HTTP_ORIGIN=APP)
    assert not [h for h in got.headers if h.lower().startswith("access-control-")]


@pytest.mark.django_db
def test_pages_outside_the_api_get_no_cors_headers(cors, api):
    response = api().get("/healthz", HTTP_ORIGIN=APP)
    assert "Access-Control-Allow-Origin" not in response


def test_origins_are_checked_at_startup():
    assert cors_origins(["https://App.example.com", "http://localhost:3000"]) == [
        "https://app.example.com",
        "http://localhost:3000",
    ]
    assert cors_origins(["*"]) == ["*"]
    for bad in [
        "app.example.com",
        "https://app.example.com/",
        "https://app.example.com/x",
        "ftp://a.example",
        "https://a.example?x=1",
        "https://u:p@a.example",
        "http://a.example:99999",
        "https://",
    ]:
        with pytest.raises(ImproperlyConfigured, match="AIRLOCK_CORS_ALLOWED_ORIGINS"):
            cors_origins([bad])
    with pytest.raises(ImproperlyConfigured, match="nothing else"):
        cors_origins(["*", "https://a.example"])


def test_a_wildcard_with_credentials_is_refused():
    with pytest.raises(ImproperlyConfigured, match="AIRLOCK_CORS_ALLOW_CREDENTIALS"):
        cors_settings(["*"], allow_credentials=True)
    assert cors_settings(["*"], allow_credentials=False)["CORS_ALLOW_ALL_ORIGINS"] is True
    explicit = cors_settings([APP], allow_credentials=True)
    assert explicit["CORS_ALLOW_CREDENTIALS"] is True and explicit["CORS_ALLOWED_ORIGINS"] == [APP]
