"""A client token reaches exactly the allowlisted API operations; every other route refuses it.

Walks every URL pattern of the URLconf: each DRF operation a client token is
not allowed (attachments/client_tokens/scope.py) must answer `403
CLIENT_TOKEN_SCOPE`; the allowed ones are pinned here, so opening a view to
client tokens is a visible decision. Routes outside DRF (the admin, pages,
probes, metrics, the signed PUT) never take a client token as a credential.
"""

from __future__ import annotations

import re
import uuid

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient
from rest_framework.views import APIView

from attachments.client_tokens.scope import client_token_may_call

pytestmark = pytest.mark.django_db

METHODS = ("get", "post", "put", "patch", "delete", "head")

# (route, method) a client token may call: intents, uploads, tus, the staged lifecycle, reads.
OPEN = {
    ("profiles", "GET"),
    ("uploads", "POST"),
    ("uploads/<str:attachment_id>/complete", "POST"),
    ("uploads/<str:attachment_id>/parts", "POST"),
    ("tus/", "POST"),
    ("tus/<str:attachment_id>", "HEAD"),
    ("tus/<str:attachment_id>", "PATCH"),
    ("tus/<str:attachment_id>", "DELETE"),
    ("attachments", "GET"),
    ("attachments", "POST"),
    ("attachments/heartbeat", "POST"),
    ("attachments/discard-all", "POST"),
    ("attachments/commit", "POST"),
    ("attachments/<str:attachment_id>", "GET"),
    ("attachments/<str:attachment_id>/download", "GET"),
    ("attachments/<str:attachment_id>/thumbnail", "GET"),
    ("attachments/<str:attachment_id>/display", "GET"),
    ("attachments/<str:attachment_id>/poster", "GET"),
    ("attachments/<str:attachment_id>/web", "GET"),
    ("attachments/<str:attachment_id>/variants/<slug:name>", "GET"),
    ("attachments/<str:attachment_id>/discard", "POST"),
    ("guest-uploads/<str:attachment_id>", "DELETE"),  # an upload link's guest (others: 404 by the service)
}
# Public for everyone (they describe, they grant nothing): a client token is simply not needed.
PUBLIC = {"SpectacularAPIView", "SpectacularSwaggerView"}


def _routes():
    """(route within its prefix, full path, view) of every URL pattern."""

    def walk(patterns, prefix: str):
        for entry in patterns:
            if isinstance(entry, URLResolver):
                yield from walk(entry.url_patterns, prefix + str(entry.pattern))
            elif isinstance(entry, URLPattern):
                yield str(entry.pattern), prefix + str(entry.pattern), entry.callback

    yield from walk(get_resolver().url_patterns, "")


def _concrete(route: str) -> str:
    path = re.sub(r"<uuid:\w+>|<str:\w+>", str(uuid.uuid4()), route)
    path = re.sub(r"<slug:\w+>|<path:\w+>|<int:\w+>", "1", path)
    return "/" + path.lstrip("^").rstrip("$")


def _drf_operations():
    for route, full, callback in _routes():
        cls = getattr(callback, "cls", None)
        if cls is None or not issubclass(cls, APIView):
            continue
        for method in METHODS:
            if hasattr(cls, method) and method in cls.http_method_names:
                yield route, full, cls, method.upper()


@pytest.fixture
def device(alice):
    from attachments.client_tokens.services.client_tokens import client_token_issue

    key = client_token_issue(user=alice, subject="seller-1", ttl_seconds=600, ref="ad:1").key
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}", HTTP_TUS_RESUMABLE="1.0.0")
    return client


def test_the_allowlist_is_exactly_the_pinned_operations():
    declared = {
        (route, method)
        for route, full, cls, method in _drf_operations()
        if full.startswith("api/v1/") and client_token_may_call(cls, method)
    }
    assert declared == OPEN


def test_every_closed_operation_refuses_a_client_token(device):
    closed = [
        (full, cls, method)
        for route, full, cls, method in _drf_operations()
        if cls.__name__ not in PUBLIC and not client_token_may_call(cls, method)
    ]
    assert len(closed) >= 8  # release, restore, delete, usage, search, storage-events, minting, logout…
    for full, cls, method in closed:
        response = device.generic(method, _concrete(full), "{}", content_type="application/json")
        if cls.authentication_classes == []:  # its own credential (storage-events' bearer secret)
            assert response.status_code in (401, 403), (full, method, response.status_code)
            continue
        assert response.status_code == 403, (full, method, response.status_code, response.content)
        assert response.json()["error"]["code"] == "CLIENT_TOKEN_SCOPE", (full, method)


def test_open_operations_take_the_client_token(device):
    for route, full, cls, method in _drf_operations():
        if (route, method) not in OPEN:
            continue
        response = device.generic(method, _concrete(full), "{}", content_type="application/json")
        assert response.status_code not in (401, 403), (full, method, response.status_code, response.content)


def test_routes_outside_drf_never_take_a_client_token(device, settings):
    settings.AIRLOCK_METRICS_TOKEN = "metrics-secret"
    settings.AIRLOCK_METRICS = settings.AIRLOCK_METRICS.replace(open=False)
    seen = 0
    for _route, full, callback in _routes():
        if getattr(callback, "cls", None) is not None or "<" in full and "admin" not in full:
            continue
        path = _concrete(full)
        if full.startswith("admin/"):
            path = "/admin/"
        response = device.get(path)
        seen += 1
        if full.startswith("admin/"):
            assert response.status_code == 302 and "/login/" in response["Location"], (full, response.status_code)
        elif full == "metrics":
            assert response.status_code == 401, response.status_code
    assert seen >= 4
    # The signed PUT's credential is its URL's token, never a header.
    put = device.put(f"/api/v1/uploads/{uuid.uuid4()}/content", b"x", content_type="image/jpeg")
    assert put.status_code in (403, 404), put.content
