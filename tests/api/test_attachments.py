"""Resource shape, wait, listing, upload-through, complete."""

import re

import pytest

from attachments.models import Attachment
from tests.support import create_intent, jpeg_bytes, png_bytes, run_pipeline, upload

pytestmark = pytest.mark.django_db


def test_resource_shape(alice, api):
    client = api(alice)
    attachment_id = upload(client, jpeg_bytes((320, 240)), filename="cat.jpg")
    pending = client.get(f"/api/v1/attachments/{attachment_id}").json()
    assert pending["size"] is None and pending["sha256"] is None and pending["reason"] is None
    assert pending["available"] is False and set(pending["links"]) == {"self"}
    assert run_pipeline(attachment_id) == "ready"
    body = client.get(f"/api/v1/attachments/{attachment_id}").json()
    assert set(body) == {
        "id",
        "subject",
        "profile",
        "status",
        "available",
        "reason",
        "filename",
        "size",
        "content_type",
        "sha256",
        "created_at",
        "ready_at",
        "expires_at",
        "committed",
        "lifecycle",
        "ref",
        "legal_hold",
        "approval",
        "duplicate_of",
        "derivatives",
        "metadata",
        "links",
    }
    assert body["status"] == "ready" and body["content_type"] == "image/jpeg" and body["available"] is True
    assert body["subject"] == alice.get_username()  # a human account's files are its own subject's
    assert re.fullmatch(r"[0-9a-f]{64}", body["sha256"])
    assert body["metadata"] == {"width": 320, "height": 240, "page_count": None}
    assert (
        body["committed"] is False
        and body["ref"] is None
        and body["lifecycle"] == "staged"
        and body["legal_hold"] is False
    )
    assert body["ready_at"].endswith("Z") and body["created_at"].endswith("Z")
    assert set(body["links"]) == {"self", "download", "thumbnail", "variants"}
    assert set(body["links"]["variants"]) == {"small", "medium", "large"}


def test_rejected_resource_has_reason(alice, api):
    client = api(alice)
    attachment_id = upload(client, b"not an image at all")
    assert run_pipeline(attachment_id) == "rejected"
    body = client.get(f"/api/v1/attachments/{attachment_id}").json()
    assert body["reason"]["code"] == "type_not_allowed" and body["reason"]["message"]
    assert "download" not in body["links"]


def test_wait_returns_at_once_when_terminal_and_validates(alice, api):
    client = api(alice)
    attachment_id = upload(client, jpeg_bytes())
    assert run_pipeline(attachment_id) == "ready"
    assert client.get(f"/api/v1/attachments/{attachment_id}?wait=30").json()["status"] == "ready"
    for bad in ("abc", "31", "-1"):
        response = client.get(f"/api/v1/attachments/{attachment_id}?wait={bad}")
        assert response.status_code == 400 and response.json()["error"]["code"] == "VALIDATION_ERROR"


def test_wait_times_out_with_the_current_state(alice, api):
    client = api(alice)
    intent = create_intent(client, size=10).json()
    body = client.get(f"/api/v1/attachments/{intent['id']}?wait=0.3").json()
    assert body["status"] == "pending"


def test_list_is_own_newest_first_paginated_and_filtered(alice, bob, api):
    client = api(alice)
    ids = [create_intent(client, size=10).json()["id"] for _ in range(5)]
    create_intent(api(bob), size=10)
    first = client.get("/api/v1/attachments?limit=2").json()
    assert [r["id"] for r in first["results"]] == ids[::-1][:2]
    second = client.get(first["next"].replace("http://testserver", "")).json()
    third = client.get(second["next"].replace("http://testserver", "")).json()
    assert [r["id"] for r in second["results"] + third["results"]] == ids[::-1][2:]
    assert third["next"] is None
    assert client.get("/api/v1/attachments?status=ready").json()["results"] == []
    assert len(client.get("/api/v1/attachments?committed=false").json()["results"]) == 5
    assert client.get("/api/v1/attachments?committed=maybe").status_code == 400
    assert client.get("/api/v1/attachments?cursor=%%%").status_code == 400


@pytest.mark.parametrize(
    "query, field",
    [
        ("status=nope", "status"),
        ("profile=nope", "profile"),
        ("limit=abc", "limit"),
        ("committed=yes", "committed"),
    ],
)
def test_list_filters_are_validated_by_name(alice, api, query, field):
    response = api(alice).get(f"/api/v1/attachments?{query}")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "VALIDATION_ERROR" and set(response.json()["error"]["details"]) == {
        field
    }


def test_list_limit_is_clamped_and_empty_filters_are_absent(alice, api):
    client = api(alice)
    for _ in range(3):
        create_intent(client, size=10)
    assert len(client.get("/api/v1/attachments?limit=0").json()["results"]) == 1
    assert len(client.get("/api/v1/attachments?limit=500").json()["results"]) == 3
    assert len(client.get("/api/v1/attachments?status=&profile=&limit=").json()["results"]) == 3
    assert len(client.get("/api/v1/attachments?profile=image&status=pending").json()["results"]) == 3


def test_upload_through_post(alice, api):
    from django.core.files.uploadedfile import SimpleUploadedFile

    client = api(alice)
    response = client.post(
        "/api/v1/attachments",
        {
            "profile": "image",
            "file": SimpleUploadedFile("p.png", png_bytes(), content_type="image/png"),
        },
        format="multipart",
    )
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "pending" and body["filename"] == "p.png"
    assert run_pipeline(body["id"]) == "ready"
    missing = client.post("/api/v1/attachments", {"profile": "image"}, format="multipart")
    assert missing.status_code == 400 and "file" in missing.json()["error"]["details"]
    unknown = client.post(
        "/api/v1/attachments", {"profile": "nope", "file": SimpleUploadedFile("p.png", png_bytes())}, format="multipart"
    )
    assert unknown.status_code == 400 and unknown.json()["error"]["code"] == "UNKNOWN_PROFILE"


def test_upload_through_answers_pending_even_when_a_worker_started_at_once(alice, api, monkeypatch):
    """The 202 renders the state the request committed, not the row as a fast worker left it."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    from attachments.models import Attachment, Status
    from attachments.uploads.services import uploads

    arrived = uploads.object_arrived

    def and_a_worker_starts(**kwargs):
        arrival = arrived(**kwargs)
        Attachment.objects.filter(pk=arrival.attachment_id).update(status=Status.PROCESSING)  # intake began
        return arrival

    monkeypatch.setattr(uploads, "object_arrived", and_a_worker_starts)
    response = api(alice).post(
        "/api/v1/attachments",
        {
            "profile": "image",
            "file": SimpleUploadedFile("p.png", png_bytes(), content_type="image/png"),
        },
        format="multipart",
    )
    assert response.status_code == 202, response.content
    assert response.json()["status"] == "pending"
    assert Attachment.objects.get(pk=response.json()["id"]).status == Status.PROCESSING


def test_upload_through_over_the_profile_limit_is_413(alice, api, settings):
    from django.core.files.uploadedfile import SimpleUploadedFile

    settings.AIRLOCK_PROFILES = {
        **settings.AIRLOCK_PROFILES,
        "avatar": {**settings.AIRLOCK_PROFILES["avatar"], "max_bytes": 1000},
    }
    response = api(alice).post(
        "/api/v1/attachments",
        {"profile": "avatar", "file": SimpleUploadedFile("big.png", b"\x89PNG" + b"0" * 2000)},
        format="multipart",
    )
    assert response.status_code == 413 and response.json()["error"]["code"] == "TOO_LARGE"
    assert Attachment.objects.count() == 0


def test_complete_is_idempotent_and_hidden_from_others(alice, mallory, api):
    from attachments.storage import get_gateway

    client = api(alice)
    intent = create_intent(client, size=len(jpeg_bytes())).json()
    row = Attachment.objects.get(pk=intent["id"])
    # The bytes got there some other way (e.g. a presigned URL with no event).
    get_gateway().write_chunks(row.storage_key, [jpeg_bytes()])
    for _ in range(2):
        response = client.post(f"/api/v1/uploads/{intent['id']}/complete")
        assert response.status_code == 202
    assert Attachment.objects.get(pk=intent["id"]).uploaded_at is not None
    assert run_pipeline(intent["id"]) == "ready"
    assert api(mallory).post(f"/api/v1/uploads/{intent['id']}/complete").status_code == 404


def test_createuser_prints_token_last(db, capsys):
    from django.core.management import call_command

    from attachments.services.tokens import api_token_find

    call_command("createuser", "carol", "--tenant", "acme")
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert api_token_find(last).user.username == "carol"


@pytest.mark.parametrize("query", ["status=%00", "status=bogus", "profile=%00", "profile=nope"])
def test_list_filters_are_validated(alice, api, query):
    response = api(alice).get(f"/api/v1/attachments?{query}")
    assert response.status_code == 400 and response.json()["error"]["code"] == "VALIDATION_ERROR"


def test_search_survives_nul_bytes(alice, api):
    response = api(alice).get("/api/v1/search?q=a%00b")
    assert response.status_code == 200 and response.json() == {"results": []}


def test_declared_content_type_is_normalised(alice, api):
    response = create_intent(api(alice), content_type="IMAGE/JPEG; charset=binary")
    assert response.status_code == 201
