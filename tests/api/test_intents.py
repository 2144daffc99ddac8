"""POST /api/v1/uploads: claims validated against the profile, key minted by the server."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from attachments.models import Attachment
from tests.support import create_intent

pytestmark = pytest.mark.django_db


def test_intent_returns_pending_row_and_single_use_put_url(alice, api):
    response = create_intent(api(alice), filename="../../etc/passwd<script>.jpg", size=1234)
    assert response.status_code == 201
    body = response.json()
    assert body["status"] == "pending" and body["profile"] == "image"
    upload = body["upload"]
    assert upload["method"] == "PUT"
    assert upload["url"].startswith("http://testserver/api/v1/uploads/") and "token=" in upload["url"]
    assert upload["headers"] == {"Content-Type": "image/jpeg"} and upload["fields"] == {}
    row = Attachment.objects.get(pk=body["id"])
    # The key is minted by the server: tenant, profile, uuid — nothing of the filename.
    assert row.storage_key == f"tenants/acme/image/{row.pk}"
    assert row.filename == "_.._etc_passwd<script>.jpg"
    assert row.declared_size == 1234 and row.size is None
    expires = timezone.datetime.fromisoformat(body["expires_at"].replace("Z", "+00:00"))
    assert abs(expires - (row.created_at + timedelta(days=7))) < timedelta(seconds=1)
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$", upload["expires_at"])


def test_profiles_lists_the_defaults(alice, api):
    body = api(alice).get("/api/v1/profiles").json()
    by_name = {p["name"]: p for p in body["profiles"]}
    assert set(by_name) == {"image", "avatar", "document", "archive", "media", "camera"}
    assert by_name["image"]["max_bytes"] == 25 * 1024 * 1024
    assert by_name["document"]["allowed_types"] == ["application/pdf"]


@pytest.mark.parametrize(
    ("payload", "status", "code"),
    [
        ({"profile": "nope", "filename": "a", "size": 1, "content_type": "image/jpeg"}, 400, "UNKNOWN_PROFILE"),
        ({"profile": "image", "filename": "a", "size": 1, "content_type": "text/html"}, 400, "TYPE_NOT_ALLOWED"),
        (
            {"profile": "image", "filename": "a", "size": 25 * 1024 * 1024 + 1, "content_type": "image/png"},
            413,
            "TOO_LARGE",
        ),
        ({"profile": "image", "filename": "a", "size": "12", "content_type": "image/png"}, 400, "VALIDATION_ERROR"),
        ({"profile": "image", "filename": "a", "size": True, "content_type": "image/png"}, 400, "VALIDATION_ERROR"),
        ({"profile": "image", "filename": "a", "size": -1, "content_type": "image/png"}, 400, "VALIDATION_ERROR"),
        ({"profile": "image", "filename": 7, "size": 1, "content_type": "image/png"}, 400, "VALIDATION_ERROR"),
        ({"profile": "image", "size": 1, "content_type": "image/png"}, 400, "VALIDATION_ERROR"),
        ({}, 400, "VALIDATION_ERROR"),
    ],
)
def test_bad_claims_get_their_contract_error_and_store_nothing(alice, api, payload, status, code):
    response = api(alice).post("/api/v1/uploads", payload, format="json")
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert error["code"] == code and error["message"] and isinstance(error["details"], dict)
    assert Attachment.objects.count() == 0


def test_missing_fields_are_named_in_details(alice, api):
    response = api(alice).post("/api/v1/uploads", {"profile": "image"}, format="json")
    assert response.status_code == 400
    details = response.json()["error"]["details"]
    # The type may be left out (a browser that does not know it): the bytes decide.
    assert {"filename", "size"} <= set(details) and "content_type" not in details


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b'"string"', b"null"])
def test_non_json_and_non_object_bodies_are_validation_errors(alice, api, body):
    response = api(alice).generic("POST", "/api/v1/uploads", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "VALIDATION_ERROR"


def test_wrong_content_type_header_is_a_validation_error(alice, api):
    response = api(alice).generic("POST", "/api/v1/uploads", b"profile=image", content_type="text/plain")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "VALIDATION_ERROR"


@pytest.mark.parametrize("header", [None, "Token not-a-real-token", "Basic Zm9vOmJhcg=="])
def test_unauthenticated_requests_get_401(db, api, header):
    client = api()
    if header:
        client.credentials(HTTP_AUTHORIZATION=header)
    response = client.post("/api/v1/uploads", {}, format="json")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "NOT_AUTHENTICATED"
