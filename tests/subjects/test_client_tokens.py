"""Client tokens: minted by a host for one subject, used by a device directly, revocable.

Everything goes through one service token (alice, the host) acting for many
people, the way hosts integrate.
"""

from __future__ import annotations

import hashlib

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone
from rest_framework.test import APIClient

from attachments.models import Attachment, ClientToken, Lifecycle
from attachments.retention.services.holds import attachment_hold_set
from tests.support import client_for, create_intent, jpeg_bytes, put_bytes, run_pipeline

pytestmark = pytest.mark.django_db


def mint(host, subject: str, **grant) -> dict:
    response = client_for(host).post(
        "/api/v1/client-tokens", {"subject": subject, "ttl_seconds": 600, **grant}, format="json"
    )
    assert response.status_code == 201, response.content
    return response.json()


def device(key: str, *, scheme: str = "Token") -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"{scheme} {key}")
    return client


def as_subject(host, subject: str) -> APIClient:
    client = client_for(host)
    client.credentials(HTTP_AUTHORIZATION=f"Token {host.api_token}", HTTP_AIRLOCK_SUBJECT=subject)
    return client


def uploaded(client, data: bytes | None = None) -> str:
    data = data or jpeg_bytes()
    intent = create_intent(client, size=len(data))
    assert intent.status_code == 201, intent.content
    assert put_bytes(intent.json()["upload"]["url"], data, content_type="image/jpeg").status_code == 202
    return intent.json()["id"]


# --- minting ------------------------------------------------------------------------------


def test_minting_answers_the_key_once_and_stores_only_its_digest(alice):
    body = mint(alice, "seller-1", profiles=["image"], ref="ad:1", max_files=3, max_bytes=10_000)
    assert body["token"].startswith("act_") and len(body["token"]) >= 4 + 32  # 192 random bits, base64url
    row = ClientToken.objects.get(pk=body["id"])
    assert row.digest == hashlib.sha256(body["token"].encode()).hexdigest()
    assert body["token"] not in (row.digest, row.prefix) and body["token"].startswith(row.prefix)
    assert (row.subject, row.profiles, row.ref, row.max_files, row.max_bytes) == (
        "seller-1",
        ["image"],
        "ad:1",
        3,
        10_000,
    )
    assert row.user_id == alice.pk and row.tenant_id == alice.membership.tenant_id
    assert 590 <= (row.expires_at - timezone.now()).total_seconds() <= 600
    assert body["expires_at"].endswith("Z") and body["subject"] == "seller-1"


@pytest.mark.parametrize(
    ("grant", "field"),
    [
        ({"ttl_seconds": 0}, "ttl_seconds"),
        ({"ttl_seconds": 86_401}, "ttl_seconds"),
        ({"ttl_seconds": "60"}, "ttl_seconds"),
        ({"profiles": ["image", "nope"]}, "profiles"),
        ({"profiles": []}, "profiles"),
        ({"subject": " x"}, "subject"),
        ({"subject": "x" * 129}, "subject"),
        ({"max_files": 0}, "max_files"),
        ({"ref": ""}, "ref"),
    ],
)
def test_a_bad_grant_is_a_validation_error_naming_the_field(alice, grant, field):
    body = {"subject": "seller-1", "ttl_seconds": 600, **grant}
    response = client_for(alice).post("/api/v1/client-tokens", body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "VALIDATION_ERROR"
    assert field in response.json()["error"]["details"]
    assert not ClientToken.objects.exists()


def test_the_longest_ttl_is_a_day(alice):
    response = client_for(alice).post("/api/v1/client-tokens", {"subject": "s", "ttl_seconds": 86_400}, format="json")
    assert response.status_code == 201


def test_a_client_token_cannot_mint_or_revoke_or_log_out(alice):
    key = mint(alice, "seller-1")["token"]
    other = mint(alice, "seller-2")["id"]
    for method, path, body in [
        ("post", "/api/v1/client-tokens", {"subject": "seller-1", "ttl_seconds": 60}),
        ("delete", f"/api/v1/client-tokens/{other}", None),
        ("post", "/api/v1/subjects/logout", {"subject": "seller-2"}),
    ]:
        response = getattr(device(key), method)(path, body, format="json")
        assert response.status_code == 403, (path, response.content)
        assert response.json()["error"]["code"] == "CLIENT_TOKEN_SCOPE"
    assert ClientToken.objects.count() == 2 and not ClientToken.objects.filter(revoked_at__isnull=False).exists()


# --- authenticating -------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["Token", "Bearer"])
def test_a_client_token_uploads_for_its_subject_as_the_minting_account(alice, scheme):
    key = mint(alice, "seller-1")["token"]
    response = create_intent(device(key, scheme=scheme))
    assert response.status_code == 201, response.content
    assert response.json()["subject"] == "seller-1"
    row = Attachment.objects.get(pk=response.json()["id"])
    assert (row.owner_id, row.subject) == (alice.pk, "seller-1")


def test_bearer_still_refuses_an_api_token_with_the_scheme_hint(alice):
    response = create_intent(device(alice.api_token, scheme="Bearer"))
    assert response.status_code == 401
    assert "Token <key>" in response.json()["error"]["message"]


@pytest.mark.parametrize("key", ["act_unknown", "act_" + "x" * 32, "act_\u00e9"])
def test_an_unknown_client_token_is_401(alice, key):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}".encode().decode("latin-1"))
    response = create_intent(client)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "NOT_AUTHENTICATED"


def test_an_expired_client_token_is_401(alice):
    body = mint(alice, "seller-1")
    ClientToken.objects.filter(pk=body["id"]).update(expires_at=timezone.now())
    assert create_intent(device(body["token"])).status_code == 401


def test_the_subject_header_may_repeat_the_tokens_subject_but_not_name_another(alice):
    key = mint(alice, "seller-1")["token"]
    same = device(key)
    same.credentials(HTTP_AUTHORIZATION=f"Token {key}", HTTP_AIRLOCK_SUBJECT="seller-1")
    assert create_intent(same).status_code == 201
    other = device(key)
    other.credentials(HTTP_AUTHORIZATION=f"Token {key}", HTTP_AIRLOCK_SUBJECT="seller-2")
    response = create_intent(other)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "CLIENT_TOKEN_SCOPE"
    assert Attachment.objects.count() == 1


# --- what it reaches ------------------------------------------------------------------------


def test_a_client_token_reads_its_subjects_files_and_gets_404_on_anothers(alice):
    key_a = mint(alice, "seller-a")["token"]
    mine = uploaded(device(key_a))
    theirs = uploaded(as_subject(alice, "seller-b"))
    hosts = uploaded(client_for(alice))  # the host's own file (subject "alice")
    assert run_pipeline(mine) == run_pipeline(theirs) == run_pipeline(hosts) == "ready"
    client = device(key_a)
    assert client.get(f"/api/v1/attachments/{mine}").status_code == 200
    got = client.get(f"/api/v1/attachments/{mine}/download")
    assert got.status_code == 200 and b"".join(got.streaming_content if got.streaming else [got.content])
    for other in (theirs, hosts):
        for suffix in ("", "/download", "/thumbnail"):
            response = client.get(f"/api/v1/attachments/{other}{suffix}")
            assert response.status_code == 404, (suffix, response.content)
    listed = client.get("/api/v1/attachments").json()["results"]
    assert [item["id"] for item in listed] == [mine]


def test_heartbeat_and_discard_reach_only_the_subjects_files(alice):
    key_a = mint(alice, "seller-a")["token"]
    mine = create_intent(device(key_a)).json()["id"]
    theirs = create_intent(as_subject(alice, "seller-b")).json()["id"]
    beat = device(key_a).post("/api/v1/attachments/heartbeat", {"ids": [mine, theirs]}, format="json").json()
    assert [entry["id"] for entry in beat["attachments"]] == [mine] and beat["missing"] == [theirs]
    assert device(key_a).post(f"/api/v1/attachments/{theirs}/discard").status_code == 404
    assert device(key_a).post(f"/api/v1/attachments/{mine}/discard").status_code == 204
    assert Attachment.objects.get(pk=theirs).lifecycle == Lifecycle.STAGED


def test_commit_only_to_the_granted_ref(alice):
    granted = mint(alice, "seller-1", ref="ad:1")["token"]
    ungranted = mint(alice, "seller-1")["token"]
    pk = create_intent(device(granted)).json()["id"]
    for key, ref, replace in [(granted, "ad:2", False), (ungranted, "ad:1", False), (granted, "ad:1", True)]:
        response = device(key).post(
            "/api/v1/attachments/commit", {"ids": [pk], "ref": ref, "replace": replace}, format="json"
        )
        assert response.status_code == 403, (ref, response.content)
        assert response.json()["error"]["code"] == "CLIENT_TOKEN_SCOPE"
    assert Attachment.objects.get(pk=pk).lifecycle == Lifecycle.STAGED
    response = device(granted).post("/api/v1/attachments/commit", {"ids": [pk], "ref": "ad:1"}, format="json")
    assert response.status_code == 200, response.content
    assert Attachment.objects.get(pk=pk).ref == "ad:1"


def test_a_client_token_cannot_release_or_delete_a_committed_file(alice):
    key = mint(alice, "seller-1", ref="ad:1")["token"]
    pk = create_intent(device(key)).json()["id"]
    assert (
        device(key).post("/api/v1/attachments/commit", {"ids": [pk], "ref": "ad:1"}, format="json").status_code == 200
    )
    for method, path, body in [
        ("post", "/api/v1/attachments/release", {"ref": "ad:1"}),
        ("delete", f"/api/v1/attachments/{pk}", None),
        ("post", f"/api/v1/attachments/{pk}/restore", None),
    ]:
        response = getattr(device(key), method)(path, body, format="json")
        assert response.status_code == 403, (path, response.content)
    assert Attachment.objects.get(pk=pk).lifecycle == Lifecycle.COMMITTED


def test_profiles_outside_the_grant_are_refused(alice):
    key = mint(alice, "seller-1", profiles=["document"])["token"]
    response = create_intent(device(key))  # profile "image"
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "CLIENT_TOKEN_SCOPE" and "profile" in response.json()["error"]["details"]
    pdf = create_intent(device(key), profile="document", filename="a.pdf", content_type="application/pdf")
    assert pdf.status_code == 201, pdf.content
    assert Attachment.objects.count() == 1


def test_the_budget_counts_files_and_declared_bytes(alice):
    key = mint(alice, "seller-1", max_files=2, max_bytes=300)["token"]
    assert create_intent(device(key), size=200).status_code == 201
    too_big = create_intent(device(key), size=101)
    assert too_big.status_code == 413
    assert too_big.json()["error"]["details"]["quota"] == "client_token_bytes"
    assert create_intent(device(key), size=100).status_code == 201
    one_more = create_intent(device(key), size=0)
    assert one_more.status_code == 413
    assert one_more.json()["error"]["details"] == {
        "quota": "client_token_files",
        "used": 2,
        "limit": 2,
        "requested": 1,
    }
    row = ClientToken.objects.get(digest=hashlib.sha256(key.encode()).hexdigest())
    assert (row.files_used, row.bytes_used) == (2, 300)
    assert Attachment.objects.count() == 2


def test_a_refused_upload_through_gives_the_tokens_budget_back(alice):
    """The budget counts uploads the token created: a refused upload-through created none."""
    data = jpeg_bytes()
    key = mint(alice, "seller-1", max_files=1, max_bytes=len(data))["token"]
    refused = device(key).post(
        "/api/v1/attachments",
        {"profile": "image", "sha256": "0" * 64, "file": SimpleUploadedFile("a.jpg", data, content_type="image/jpeg")},
        format="multipart",
    )
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "CHECKSUM_MISMATCH"
    row = ClientToken.objects.get(digest=hashlib.sha256(key.encode()).hexdigest())
    assert (row.files_used, row.bytes_used) == (0, 0)
    assert not Attachment.objects.exists()

    accepted = device(key).post(
        "/api/v1/attachments",
        {"profile": "image", "file": SimpleUploadedFile("a.jpg", data, content_type="image/jpeg")},
        format="multipart",
    )
    assert accepted.status_code == 202, accepted.content
    row.refresh_from_db()
    assert (row.files_used, row.bytes_used) == (1, len(data))


# --- revoking ---------------------------------------------------------------------------------


def test_revoked_client_token_is_401_and_revoking_is_idempotent(alice):
    body = mint(alice, "seller-1")
    assert create_intent(device(body["token"])).status_code == 201
    assert client_for(alice).delete(f"/api/v1/client-tokens/{body['id']}").status_code == 204
    assert client_for(alice).delete(f"/api/v1/client-tokens/{body['id']}").status_code == 204
    response = create_intent(device(body["token"]))
    assert response.status_code == 401 and response.json()["error"]["code"] == "NOT_AUTHENTICATED"


def test_another_tenants_token_cannot_be_revoked(alice, mallory):
    body = mint(alice, "seller-1")
    for path in (f"/api/v1/client-tokens/{body['id']}", "/api/v1/client-tokens/not-a-uuid"):
        response = client_for(mallory).delete(path)
        assert response.status_code == 404, response.content
    assert create_intent(device(body["token"])).status_code == 201


def test_logout_revokes_the_subjects_tokens_and_discards_only_its_staged_files(alice):
    a1, a2 = mint(alice, "seller-a", ref="ad:1")["token"], mint(alice, "seller-a")["token"]
    b = mint(alice, "seller-b")["token"]
    staged_a = create_intent(device(a1)).json()["id"]
    committed_a = create_intent(device(a1)).json()["id"]
    assert (
        device(a1).post("/api/v1/attachments/commit", {"ids": [committed_a], "ref": "ad:1"}, format="json").status_code
        == 200
    )
    held_a = create_intent(as_subject(alice, "seller-a")).json()["id"]
    attachment_hold_set(attachment_ids=[held_a], reason="case 7", actor="test")
    staged_b = create_intent(device(b)).json()["id"]
    hosts = create_intent(client_for(alice)).json()["id"]

    response = client_for(alice).post("/api/v1/subjects/logout", {"subject": "seller-a"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json() == {"revoked": 2, "discarded": 1}
    lifecycles = dict(Attachment.objects.values_list("pk", "lifecycle"))
    assert {str(pk): value for pk, value in lifecycles.items()} == {
        staged_a: Lifecycle.DISCARDED,
        committed_a: Lifecycle.COMMITTED,
        held_a: Lifecycle.STAGED,
        staged_b: Lifecycle.STAGED,
        hosts: Lifecycle.STAGED,
    }
    assert create_intent(device(a1)).status_code == 401 and create_intent(device(a2)).status_code == 401
    assert create_intent(device(b)).status_code == 201
    again = client_for(alice).post("/api/v1/subjects/logout", {"subject": "seller-a"}, format="json")
    assert again.json() == {"revoked": 0, "discarded": 0}
