"""The gated read: status is checked in the serving path, other tenants get 404."""

from urllib.parse import quote

import pytest

from attachments.models import Attachment
from attachments.services.lifecycle import attachment_discard
from attachments.services.moderation import attachment_take_down
from tests.support import jpeg_bytes, pdf_bytes, run_pipeline, upload

pytestmark = pytest.mark.django_db

CSP = "default-src 'none'; sandbox"


def _paths(attachment_id):
    base = f"/api/v1/attachments/{attachment_id}"
    return base, f"{base}/download", f"{base}/thumbnail"


# (viewer, status) → can see resource, the download's answer. Only `ready` serves a byte, to the owner too.
GATING = [
    ("owner", "pending", True, 409),
    ("owner", "ready", True, 200),
    ("owner", "rejected", True, 404),
    ("owner", "failed", True, 404),
    ("same_tenant", "pending", False, 404),
    ("same_tenant", "ready", True, 200),
    ("same_tenant", "rejected", False, 404),
    ("other_tenant", "pending", False, 404),
    ("other_tenant", "ready", False, 404),
]


@pytest.mark.parametrize(("viewer", "status", "sees", "answer"), GATING)
def test_gating_rule(alice, bob, mallory, api, viewer, status, sees, answer):
    attachment_id = upload(api(alice), jpeg_bytes())
    if status != "pending":
        assert run_pipeline(attachment_id) == "ready"
        if status != "ready":
            Attachment.objects.filter(pk=attachment_id).update(status=status, reason_code="corrupt")
    client = api({"owner": alice, "same_tenant": bob, "other_tenant": mallory}[viewer])
    detail, download, _thumb = _paths(attachment_id)
    seen = client.get(detail)
    assert seen.status_code == (200 if sees else 404)
    if not sees:
        assert seen.json()["error"]["code"] == "NOT_FOUND"
    got = client.get(download)
    assert got.status_code == answer
    if sees:
        assert ("download" in seen.json()["links"]) is (answer == 200)


def test_discarded_and_expired_are_never_served(alice, bob, api):
    from datetime import timedelta

    from django.utils import timezone

    first = upload(api(alice), jpeg_bytes())
    second = upload(api(alice), jpeg_bytes())
    assert run_pipeline(first) == "ready" and run_pipeline(second) == "ready"
    attachment_discard(user=alice, attachment_id=first)
    Attachment.objects.filter(pk=second).update(expires_at=timezone.now() - timedelta(seconds=1))
    for attachment_id in (first, second):
        for client in (api(alice), api(bob)):
            assert client.get(_paths(attachment_id)[1]).status_code == 404


def test_take_down_stops_serving_at_once(alice, bob, api):
    attachment_id = upload(api(alice), jpeg_bytes())
    assert run_pipeline(attachment_id) == "ready"
    assert api(bob).get(_paths(attachment_id)[1]).status_code == 200
    attachment_take_down(attachment_id=attachment_id, actor="staff:mod", note="abuse")
    assert api(bob).get(_paths(attachment_id)[1]).status_code == 404
    assert api(alice).get(_paths(attachment_id)[1]).status_code == 404
    body = api(alice).get(_paths(attachment_id)[0]).json()
    assert body["status"] == "rejected" and body["reason"]["code"] == "moderator"


def _body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def test_download_headers(alice, api):
    name = 'résumé "final"; <b>.pdf'
    attachment_id = upload(api(alice), pdf_bytes(), profile="document", filename=name, content_type="application/pdf")
    assert run_pipeline(attachment_id) == "ready"
    response = api(alice).get(_paths(attachment_id)[1])
    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    disposition = response["Content-Disposition"]
    assert disposition.startswith("attachment; ")
    assert disposition.endswith(f"filename*=UTF-8''{quote(name, safe='')}")
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Security-Policy"] == CSP
    assert _body(response) == pdf_bytes()


def test_range_requests(alice, api):
    data = pdf_bytes()
    attachment_id = upload(api(alice), data, profile="document", filename="a.pdf", content_type="application/pdf")
    assert run_pipeline(attachment_id) == "ready"
    client = api(alice)
    partial = client.get(_paths(attachment_id)[1], HTTP_RANGE="bytes=0-9")
    assert partial.status_code == 206 and _body(partial) == data[:10]
    assert partial["Content-Range"] == f"bytes 0-9/{len(data)}"
    suffix = client.get(_paths(attachment_id)[1], HTTP_RANGE="bytes=-5")
    assert suffix.status_code == 206 and _body(suffix) == data[-5:]
    beyond = client.get(_paths(attachment_id)[1], HTTP_RANGE=f"bytes={len(data) + 5}-")
    assert beyond.status_code == 416


def test_thumbnail_is_inline_webp_and_only_once_there_is_one(alice, api):
    client = api(alice)
    attachment_id = upload(client, jpeg_bytes((800, 600)), filename="cat.jpg")
    assert client.get(_paths(attachment_id)[2]).status_code == 409  # not ready: nothing of it is served yet
    assert run_pipeline(attachment_id) == "ready"
    response = client.get(_paths(attachment_id)[2])
    assert response.status_code == 200
    assert response["Content-Type"] == "image/webp"
    assert response["Content-Disposition"].startswith("inline; ")
    assert response["Content-Security-Policy"] == CSP and response["X-Content-Type-Options"] == "nosniff"
    assert _body(response)[:4] == b"RIFF"
    body = client.get(_paths(attachment_id)[0]).json()
    assert body["derivatives"]["thumbnail"]["width"] == 256
    assert body["links"]["thumbnail"].split("?")[0].endswith("/thumbnail")
    archive = upload(
        client, b"PK\x05\x06" + b"\x00" * 18, profile="archive", filename="e.zip", content_type="application/zip"
    )
    assert run_pipeline(archive) == "ready"
    assert client.get(_paths(archive)[2]).status_code == 404


def test_not_found_for_garbage_and_unknown_ids(alice, api):
    client = api(alice)
    for path in ("/api/v1/attachments/not-a-uuid", "/api/v1/attachments/00000000-0000-0000-0000-000000000000/download"):
        response = client.get(path)
        assert response.status_code == 404 and response.json()["error"]["code"] == "NOT_FOUND"
