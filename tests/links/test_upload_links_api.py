"""Upload links through the API and the guest page: make, list, show, disable; a guest's uploads and removal."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import signing
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone
from rest_framework.test import APIClient

from attachments.models import Approval, Attachment, ClientToken, Lifecycle, LinkGuest, UploadLink
from tests.support import client_for, png_bytes, put_bytes, run_pipeline

pytestmark = pytest.mark.django_db


def _expires(days: int = 3) -> str:
    return (timezone.now() + timedelta(days=days)).isoformat()


def _create(user, **body):
    return client_for(user).post(
        "/api/v1/upload-links", {"ref": "event:7", "expires_at": _expires(), **body}, format="json"
    )


def _open_page(link_id, client=None):
    """A guest's browser opens the page: (its client, the token the page speaks with, the response)."""
    client = client or APIClient()
    response = client.get(f"/l/{link_id}")
    token = None
    if response.status_code == 200:
        html = response.content.decode()
        marker = 'name="airlock-guest-token" content="'
        token = html[html.index(marker) + len(marker) :].split('"', 1)[0]
    return client, token, response


def _guest_api(token):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return api


def _guest_upload(token, data=None, *, filename="p.png"):
    data = data or png_bytes()
    intent = _guest_api(token).post(
        "/api/v1/uploads",
        {"profile": "camera", "filename": filename, "size": len(data), "content_type": "image/png"},
        format="json",
    )
    if intent.status_code != 201:
        return intent, None
    assert put_bytes(intent.json()["upload"]["url"], data, content_type="image/png").status_code == 202
    return intent, intent.json()["id"]


def test_make_list_show_and_disable(alice, mallory):
    made = _create(alice, title="Anna & Ben", max_files_per_guest=5, profiles=["image"])
    assert made.status_code == 201, made.content
    body = made.json()
    assert body["url"].endswith(f"/l/{body['id']}")
    assert body["qr_svg_url"].endswith(f"/l/{body['id']}/qr.svg")
    assert (body["state"], body["profiles"], body["max_files_per_guest"]) == ("open", ["image"], 5)
    listed = client_for(alice).get("/api/v1/upload-links").json()["results"]
    assert [link["id"] for link in listed] == [body["id"]]
    assert client_for(mallory).get(f"/api/v1/upload-links/{body['id']}").status_code == 404  # another tenant
    assert client_for(mallory).get("/api/v1/upload-links").json()["results"] == []
    assert client_for(alice).delete(f"/api/v1/upload-links/{body['id']}").status_code == 204
    assert client_for(alice).delete(f"/api/v1/upload-links/{body['id']}").status_code == 204  # idempotent
    shown = client_for(alice).get(f"/api/v1/upload-links/{body['id']}").json()
    assert shown["state"] == "disabled" and shown["disabled_at"]


@pytest.mark.parametrize(
    "body, field",
    [
        ({"ref": ""}, "ref"),
        ({"expires_at": "2001-01-01T00:00:00Z"}, "expires_at"),
        ({"profiles": ["nope"]}, "profiles"),
        ({"max_files": 0}, "max_files"),
    ],
)
def test_bad_input_is_a_validation_error(alice, body, field):
    response = _create(alice, **body)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "VALIDATION_ERROR"
    assert field in response.json()["error"]["details"]


def test_a_client_token_may_not_make_links(alice):
    key = client_for(alice).post("/api/v1/client-tokens", {"subject": "u1", "ttl_seconds": 60}, format="json")
    response = _guest_api(key.json()["token"]).post(
        "/api/v1/upload-links", {"ref": "x", "expires_at": _expires()}, format="json"
    )
    assert response.status_code == 403


def test_qr_codes_encode_the_page_url(alice):
    link = _create(alice).json()
    svg = APIClient().get(f"/l/{link['id']}/qr.svg")
    png = APIClient().get(f"/l/{link['id']}/qr.png")
    assert svg.status_code == 200 and svg["Content-Type"] == "image/svg+xml" and b"<svg" in svg.content
    assert png.status_code == 200 and png.content[:8] == b"\x89PNG\r\n\x1a\n"
    assert svg["Content-Security-Policy"] == "default-src 'none'; style-src 'unsafe-inline'"
    assert svg["Cache-Control"] == png["Cache-Control"] == "public, max-age=86400"


def test_a_device_without_a_cookie_becomes_a_guest_and_keeps_its_subject(alice):
    link = _create(alice).json()
    browser, token, page = _open_page(link["id"])
    assert page.status_code == 200
    cookie = page.cookies["airlock_guest"]
    assert cookie["httponly"] and cookie["samesite"] == "Lax" and cookie["path"] == "/l/"
    device = signing.loads(cookie.value, salt="airlock.guest-device")
    subject = f"guest:{link['id'].replace('-', '')}:{device}"
    assert LinkGuest.objects.filter(link_id=link["id"], subject=subject).exists()
    assert b"moderation" not in page.content.lower() and token.startswith("act_")
    # The same device again: the same guest, a fresh token.
    _, second, _ = _open_page(link["id"], client=browser)
    assert second != token and LinkGuest.objects.filter(link_id=link["id"]).count() == 1
    # A forged cookie is a new device, not somebody else's.
    forged = APIClient()
    forged.cookies["airlock_guest"] = "x" * 30
    _open_page(link["id"], client=forged)
    assert LinkGuest.objects.filter(link_id=link["id"]).count() == 2


def test_a_guests_file_is_committed_to_the_links_ref_once_ready(alice):
    link = _create(alice).json()
    _, token, _ = _open_page(link["id"])
    _, pk = _guest_upload(token)
    row = Attachment.objects.get(pk=pk)
    assert (str(row.upload_link_id), row.approval, row.subject.startswith("guest:")) == (
        link["id"],
        Approval.NOT_REQUIRED,
        True,
    )
    assert run_pipeline(pk) == "ready"
    listed = client_for(alice).get("/api/v1/attachments?ref=event:7").json()["results"]
    assert [a["id"] for a in listed] == [pk]
    # The guest reads its own file; it cannot commit anywhere.
    assert _guest_api(token).get(f"/api/v1/attachments/{pk}").status_code == 200
    commit = _guest_api(token).post("/api/v1/attachments/commit", {"ids": [pk], "ref": "event:7"}, format="json")
    assert commit.status_code == 403


def test_requires_approval_hides_the_file_from_the_ref_until_approved(alice):
    link = _create(alice, requires_approval=True).json()
    _, token, _ = _open_page(link["id"])
    _, pk = _guest_upload(token)
    assert run_pipeline(pk) == "ready"
    resource = client_for(alice).get(f"/api/v1/attachments/{pk}").json()
    assert resource["approval"] == "pending"
    assert client_for(alice).get("/api/v1/attachments?ref=event:7").json()["results"] == []
    approved = client_for(alice).post("/api/v1/attachments/approve", {"ref": "event:7"}, format="json")
    assert approved.status_code == 200 and approved.json() == {"approved": [pk]}
    listed = client_for(alice).get("/api/v1/attachments?ref=event:7").json()["results"]
    assert [(a["id"], a["approval"]) for a in listed] == [(pk, "approved")]


def test_decline_through_the_api_discards(alice):
    link = _create(alice, requires_approval=True).json()
    _, token, _ = _open_page(link["id"])
    _, pk = _guest_upload(token)
    declined = client_for(alice).post("/api/v1/attachments/decline", {"ids": [pk]}, format="json")
    assert declined.json() == {"declined": [pk]}
    row = Attachment.objects.get(pk=pk)
    assert (row.lifecycle, row.approval) == (Lifecycle.DISCARDED, Approval.DECLINED)
    bad = client_for(alice).post("/api/v1/attachments/decline", {"ids": [pk], "ref": "x"}, format="json")
    assert bad.status_code == 400


def test_a_guest_removes_its_file_within_the_undo_window_and_gets_its_room_back(alice, settings):
    link = _create(alice, max_files_per_guest=1).json()
    _, token, _ = _open_page(link["id"])
    _, pk = _guest_upload(token)
    run_pipeline(pk)
    assert _guest_upload(token)[0].status_code == 413
    assert _guest_api(token).delete(f"/api/v1/guest-uploads/{pk}").status_code == 204
    assert Attachment.objects.get(pk=pk).lifecycle == Lifecycle.RELEASED
    assert UploadLink.objects.get(pk=link["id"]).files_used == 0
    _, second = _guest_upload(token)
    assert second is not None
    # Past the window: too late.
    Attachment.objects.filter(pk=second).update(created_at=timezone.now() - timedelta(hours=25))
    late = _guest_api(token).delete(f"/api/v1/guest-uploads/{second}")
    assert late.status_code == 409
    # Another guest, or the host's service token, cannot remove it this way.
    _, other, _ = _open_page(link["id"])
    assert _guest_api(other).delete(f"/api/v1/guest-uploads/{second}").status_code == 404
    assert client_for(alice).delete(f"/api/v1/guest-uploads/{second}").status_code == 404


def test_a_file_its_guest_removed_leaves_the_approval_queue(alice):
    """Removed before the host decided: nothing waits, nothing is approved, no webhook says otherwise."""
    from attachments.links.admin import queue_files, with_waiting_count

    link = _create(alice, requires_approval=True).json()
    _, token, _ = _open_page(link["id"])
    _, kept = _guest_upload(token)
    _, removed = _guest_upload(token, filename="oops.png")
    for pk in (kept, removed):
        assert run_pipeline(pk) == "ready"
    assert _guest_api(token).delete(f"/api/v1/guest-uploads/{removed}").status_code == 204
    assert Attachment.objects.get(pk=removed).lifecycle == Lifecycle.DISCARDED

    assert [str(a.pk) for a in queue_files(alice)] == [kept]
    assert with_waiting_count(UploadLink.objects.filter(pk=link["id"])).get().waiting == 1
    approved = client_for(alice).post("/api/v1/attachments/approve", {"ref": "event:7"}, format="json")
    assert approved.status_code == 200 and approved.json()["approved"] == [kept]
    row = Attachment.objects.get(pk=removed)
    assert (row.lifecycle, row.approval) == (Lifecycle.DISCARDED, Approval.PENDING)


def test_a_guests_refused_upload_through_gives_the_links_and_the_guests_room_back(alice):
    """Nothing is kept of a refused upload-through, so nothing of it counts: the guest may send its one file."""
    link = _create(alice, max_files=1, max_files_per_guest=1, max_bytes_per_guest=len(png_bytes())).json()
    _, token, _ = _open_page(link["id"])
    data = png_bytes()
    refused = _guest_api(token).post(
        "/api/v1/attachments",
        {"profile": "camera", "sha256": "0" * 64, "file": SimpleUploadedFile("p.png", data, content_type="image/png")},
        format="multipart",
    )
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "CHECKSUM_MISMATCH"
    assert not Attachment.objects.exists()
    assert UploadLink.objects.get(pk=link["id"]).files_used == 0
    assert LinkGuest.objects.values_list("files_used", "bytes_used").get() == (0, 0)
    assert ClientToken.objects.values_list("files_used", "bytes_used").get() == (0, 0)

    accepted = _guest_api(token).post(
        "/api/v1/attachments",
        {"profile": "camera", "file": SimpleUploadedFile("p.png", data, content_type="image/png")},
        format="multipart",
    )
    assert accepted.status_code == 202, accepted.content
    assert UploadLink.objects.get(pk=link["id"]).files_used == 1
    assert LinkGuest.objects.values_list("files_used", "bytes_used").get() == (1, len(data))


def test_per_link_limit_names_the_link(alice):
    link = _create(alice, max_files=1).json()
    _, first, _ = _open_page(link["id"])
    _, second, _ = _open_page(link["id"])
    assert _guest_upload(first)[1] is not None
    refused, _ = _guest_upload(second)
    assert refused.status_code == 413
    assert refused.json()["error"]["details"]["quota"] == "link_files"


def test_a_disabled_or_expired_link_is_gone(alice):
    link = _create(alice).json()
    _, token, _ = _open_page(link["id"])
    client_for(alice).delete(f"/api/v1/upload-links/{link['id']}")
    _, _, page = _open_page(link["id"])
    assert page.status_code == 410 and b"closed this upload link" in page.content
    # The page's token went with the link, and says why: the page can tell its guest the link closed.
    gone, _ = _guest_upload(token)
    assert gone.status_code == 410 and gone.json()["error"]["code"] == "LINK_GONE"
    assert _guest_api(token).get("/api/v1/attachments").status_code == 410
    # A guest token revoked on its own (its link still open) is just invalid.
    still_open = _create(alice).json()
    _, revoked, _ = _open_page(still_open["id"])
    ClientToken.objects.filter(upload_link_id=still_open["id"]).update(revoked_at=timezone.now())
    assert _guest_upload(revoked)[0].status_code == 401

    expired = _create(alice).json()
    _, token, _ = _open_page(expired["id"])
    UploadLink.objects.filter(pk=expired["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    refused, _ = _guest_upload(token)
    assert refused.status_code == 410 and refused.json()["error"]["code"] == "LINK_GONE"
    _, _, page = _open_page(expired["id"])
    assert page.status_code == 410 and b"has expired" in page.content
    assert APIClient().get("/l/00000000-0000-4000-8000-000000000000").status_code == 404


def test_a_file_waiting_for_approval_is_delivered_full_size_to_its_guest_only(alice):
    link = _create(alice, requires_approval=True).json()
    _, token, _ = _open_page(link["id"])
    _, pk = _guest_upload(token)
    run_pipeline(pk)
    assert _guest_api(token).get(f"/api/v1/attachments/{pk}/download").status_code in (200, 302)
    assert client_for(alice).get(f"/api/v1/attachments/{pk}/download").status_code == 404
    assert client_for(alice).get(f"/api/v1/attachments/{pk}/thumbnail").status_code in (200, 302)  # to decide
    signed = client_for(alice).get(f"/api/v1/attachments/{pk}").json()["links"].get("download")
    if signed:  # a signed link minted for the host does not deliver it either
        assert APIClient().get(signed).status_code == 404
    client_for(alice).post("/api/v1/attachments/approve", {"ids": [pk]}, format="json")
    assert client_for(alice).get(f"/api/v1/attachments/{pk}/download").status_code in (200, 302)


def test_a_guests_own_links_to_a_file_waiting_for_approval_work_without_a_header(alice, mallory):
    """The guest page shows its pending photos and plays its pending videos with <img src>/<video src>:
    links minted for the guest read full size, for anyone holding them, as any signed link does."""
    link = _create(alice, requires_approval=True).json()
    _, token, _ = _open_page(link["id"])
    _, pk = _guest_upload(token)
    assert run_pipeline(pk) == "ready"
    guests = _guest_api(token).get(f"/api/v1/attachments/{pk}").json()["links"]
    for name in ("download", "thumbnail"):
        assert APIClient().get(guests[name]).status_code in (200, 302), name
    # Bound to this file: the same signature names no other file, not even the guest's next one.
    _, other = _guest_upload(token, filename="second.png")
    assert run_pipeline(other) == "ready"
    forged = guests["download"].replace(pk, other)
    assert APIClient().get(forged).status_code == 403
    # The host's own links stay previews; a host link with the guest's name spliced in is no credential.
    hosts = client_for(alice).get(f"/api/v1/attachments/{pk}").json()["links"]
    assert "download" not in hosts
    spliced = guests["download"].split("?")[0] + "?" + hosts["thumbnail"].split("?")[1]
    assert APIClient().get(spliced).status_code == 403
    # Minted before the approval, it still reads after it.
    client_for(alice).post("/api/v1/attachments/approve", {"ids": [pk]}, format="json")
    assert APIClient().get(guests["download"]).status_code in (200, 302)


def test_a_file_waiting_for_approval_shows_its_full_size_link_and_available_to_its_guest_only(alice):
    """The resource offers what the read path serves: the host decides from previews, then approves."""
    link = _create(alice, requires_approval=True).json()
    _, token, _ = _open_page(link["id"])
    _, pk = _guest_upload(token)
    assert run_pipeline(pk) == "ready"

    host = client_for(alice)
    shown = host.get(f"/api/v1/attachments/{pk}").json()
    listed = host.get(f"/api/v1/attachments?ids={pk}").json()["results"]
    for resource in (shown, *listed):
        assert resource["approval"] == "pending" and resource["available"] is False
        assert "download" not in resource["links"] and "display" not in resource["links"]
        assert APIClient().get(resource["links"]["thumbnail"]).status_code in (200, 302)  # a preview, to decide
    assert len(listed) == 1

    guests = _guest_api(token).get(f"/api/v1/attachments/{pk}").json()
    assert guests["available"] is True and "download" in guests["links"]
    assert _guest_api(token).get(guests["links"]["download"]).status_code in (200, 302)

    host.post("/api/v1/attachments/approve", {"ids": [pk]}, format="json")
    approved = host.get(f"/api/v1/attachments/{pk}").json()
    assert approved["available"] is True
    assert APIClient().get(approved["links"]["download"]).status_code in (200, 302)
