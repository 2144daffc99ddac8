"""Signed delivery links: the resource's file links work without any header, and never past the gate."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from attachments import signing
from attachments.errors import SignatureInvalid, UrlExpired
from attachments.models import Attachment, Lifecycle
from attachments.retention.services.release import attachment_delete
from attachments.services.lifecycle import attachment_discard
from attachments.services.moderation import attachment_take_down
from ops.logging import redact
from tests.support import jpeg_bytes, pdf_bytes, run_pipeline, upload

pytestmark = pytest.mark.django_db

CSP = "default-src 'none'; sandbox"


def _body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def _links(api, user, attachment_id) -> dict[str, str]:
    response = api(user).get(f"/api/v1/attachments/{attachment_id}")
    assert response.status_code == 200, response.content
    return response.json()["links"]


def _path(link: str) -> str:
    """The link as a test client's path (links are absolute: http://testserver/…)."""
    parts = urlsplit(link)
    return f"{parts.path}?{parts.query}" if parts.query else parts.path


def _query(link: str) -> dict[str, str]:
    return {name: values[0] for name, values in parse_qs(urlsplit(link).query).items()}


def _with(link: str, **changes: str) -> str:
    parts = urlsplit(link)
    return f"{parts.path}?{urlencode({**_query(link), **changes})}"


def _anonymous():
    """No Authorization header and no cookie: what an <img src> on another site sends."""
    return Client()


def _error(response) -> str:
    return response.json()["error"]["code"]


@pytest.fixture
def ready_photo(alice, api):
    attachment_id = upload(api(alice), jpeg_bytes((800, 600)), filename="cat.jpg")
    assert run_pipeline(attachment_id) == "ready"
    return attachment_id


def test_links_are_signed_and_work_without_any_header(alice, api, ready_photo):
    links = _links(api, alice, ready_photo)
    assert set(links) == {"self", "download", "thumbnail", "variants"}  # variants: tests/variants
    assert "?" not in links["self"]  # the JSON resource itself still needs the caller's credential
    for name in ("download", "thumbnail"):
        assert urlsplit(links[name]).path == f"/api/v1/attachments/{ready_photo}/{name}"
        assert set(_query(links[name])) == {"exp", "kid", "sig"}
    row = Attachment.objects.get(pk=ready_photo)

    download = _anonymous().get(_path(links["download"]))
    assert download.status_code == 200, download.content
    assert download["Content-Type"] == "image/jpeg"
    assert download["Content-Disposition"].startswith("attachment; ")
    assert download["Cache-Control"] == "private, no-store"
    assert download["Content-Security-Policy"] == CSP and download["X-Content-Type-Options"] == "nosniff"
    assert len(_body(download)) == row.size

    thumbnail = _anonymous().get(_path(links["thumbnail"]))
    assert thumbnail.status_code == 200
    assert thumbnail["Content-Type"] == "image/webp" and thumbnail["Content-Disposition"].startswith("inline; ")
    assert _body(thumbnail)[:4] == b"RIFF"


def test_links_are_stable_across_reads_and_expire_on_a_rounded_step(alice, api, ready_photo, settings, monkeypatch):
    settings.AIRLOCK_URL_SECONDS = settings.AIRLOCK_URL_SECONDS.replace(delivery=3600)
    monkeypatch.setattr(signing, "_now", lambda: 1_800_000_000.0 + 17)
    first = _links(api, alice, ready_photo)
    monkeypatch.setattr(signing, "_now", lambda: 1_800_000_000.0 + 250)
    assert _links(api, alice, ready_photo) == first
    exp = int(_query(first["download"])["exp"])
    assert exp % signing.EXPIRY_STEP_SECONDS == 0
    assert 1_800_000_017 + 3600 <= exp < 1_800_000_017 + 3600 + signing.EXPIRY_STEP_SECONDS
    monkeypatch.setattr(signing, "_now", lambda: float(exp))
    assert _links(api, alice, ready_photo) != first  # the next step mints the next link


def test_a_link_past_its_expiry_is_url_expired(alice, api, ready_photo, monkeypatch):
    link = _links(api, alice, ready_photo)["thumbnail"]
    exp = int(_query(link)["exp"])
    real_now = timezone.now
    start = real_now()

    def at(unix: float) -> None:
        monkeypatch.setattr(timezone, "now", lambda: start + timedelta(seconds=unix - start.timestamp()))

    at(exp - 1)
    assert _anonymous().get(_path(link)).status_code == 200
    at(exp)
    expired = _anonymous().get(_path(link))
    assert expired.status_code == 403 and _error(expired) == "URL_EXPIRED"


def test_shortening_the_lifetime_shortens_links_already_out(alice, api, ready_photo, settings):
    link = _links(api, alice, ready_photo)["download"]
    settings.AIRLOCK_URL_SECONDS = settings.AIRLOCK_URL_SECONDS.replace(delivery=60)
    response = _anonymous().get(_path(link))
    assert response.status_code == 403 and _error(response) == "URL_EXPIRED"


def test_tampered_links_are_signature_invalid(alice, api, ready_photo):
    other = upload(api(alice), jpeg_bytes((300, 200)), filename="dog.jpg")
    assert run_pipeline(other) == "ready"
    links = _links(api, alice, ready_photo)
    download, thumbnail = links["download"], links["thumbnail"]
    query = _query(download)
    assert _anonymous().get(_path(download)).status_code == 200  # the untouched link works
    tampered = {
        "another attachment": _path(download).replace(ready_photo, other),
        "another rendition": f"/api/v1/attachments/{ready_photo}/download?{urlsplit(thumbnail).query}",
        "a later expiry": _with(download, exp=str(int(query["exp"]) + 300)),
        "an earlier expiry": _with(download, exp=str(int(query["exp"]) - 300)),
        "a padded expiry": _with(download, exp="0" + query["exp"]),
        "another signature": _with(download, sig=("A" if query["sig"][0] != "A" else "B") + query["sig"][1:]),
        "an unknown key id": _with(download, kid="0badc0de"),
        "no expiry": _path(download).replace(f"exp={query['exp']}&", ""),
        "an unknown attachment": _path(download).replace(ready_photo, "00000000-0000-4000-8000-000000000000"),
        "not an id": _path(download).replace(ready_photo, "not-a-uuid"),
    }
    for what, path in tampered.items():
        response = _anonymous().get(path)
        assert (response.status_code, _error(response)) == (403, "SIGNATURE_INVALID"), what


def test_the_signature_binds_the_tenant():
    exp = signing.delivery_expiry()
    query = dict(
        part.split("=", 1)
        for part in signing.delivery_query(
            tenant_id=1, attachment_id="8c0e3d4e-0000-4000-8000-000000000001", name="thumbnail", exp=exp
        ).split("&")
    )
    common = {"attachment_id": "8c0e3d4e-0000-4000-8000-000000000001", "name": "thumbnail", **query}
    signing.delivery_check(tenant_id=1, **common)
    with pytest.raises(SignatureInvalid):
        signing.delivery_check(tenant_id=2, **common)


def test_any_rendition_name_can_be_signed_and_only_that_name_verifies():
    exp = signing.delivery_expiry()
    ids = {"tenant_id": 7, "attachment_id": "8c0e3d4e-0000-4000-8000-000000000001"}
    query = dict(part.split("=", 1) for part in signing.delivery_query(**ids, name="medium", exp=exp).split("&"))
    signing.delivery_check(**ids, name="medium", **query)
    with pytest.raises(SignatureInvalid):
        signing.delivery_check(**ids, name="large", **query)
    with pytest.raises(UrlExpired):
        signing.delivery_check(**ids, name="medium", **query, now=exp + 1)
    with pytest.raises(ValueError):
        signing.delivery_query(**ids, name="../download", exp=exp)


def test_rotating_the_secret_invalidates_links_unless_the_old_one_is_kept_as_previous(
    alice, api, ready_photo, settings
):
    old_secret, new_secret = "o" * 40, "n" * 40
    settings.AIRLOCK_DELIVERY_URL_SECRET = old_secret
    old_link = _links(api, alice, ready_photo)["thumbnail"]
    assert _anonymous().get(_path(old_link)).status_code == 200

    settings.AIRLOCK_DELIVERY_URL_SECRET = new_secret
    refused = _anonymous().get(_path(old_link))
    assert refused.status_code == 403 and _error(refused) == "SIGNATURE_INVALID"
    new_link = _links(api, alice, ready_photo)["thumbnail"]
    assert _query(new_link)["kid"] != _query(old_link)["kid"]
    assert _anonymous().get(_path(new_link)).status_code == 200

    settings.AIRLOCK_DELIVERY_URL_PREVIOUS_SECRETS = [old_secret]  # during a rotation: accepted, never signing
    assert _anonymous().get(_path(old_link)).status_code == 200
    assert _query(_links(api, alice, ready_photo)["thumbnail"])["kid"] == _query(new_link)["kid"]


def test_the_default_key_rotates_with_secret_key_and_honours_its_fallbacks(alice, api, ready_photo, settings):
    settings.AIRLOCK_DELIVERY_URL_SECRET = ""
    old_key = settings.SECRET_KEY
    link = _links(api, alice, ready_photo)["download"]
    # Not SECRET_KEY itself: a key of its own, derived with the purpose string.
    assert _query(link)["sig"] != signing.signing.Signer(key=old_key).signature(
        f"v1:{Attachment.objects.get(pk=ready_photo).tenant_id}:{ready_photo}:download:{_query(link)['exp']}"
    )
    settings.SECRET_KEY = "k" * 60
    assert _error(_anonymous().get(_path(link))) == "SIGNATURE_INVALID"
    settings.SECRET_KEY_FALLBACKS = [old_key]
    assert _anonymous().get(_path(link)).status_code == 200


def _take_down(attachment_id, alice):
    attachment_take_down(attachment_id=attachment_id, actor="staff:mod", note="abuse")


def _reject(attachment_id, alice):  # a rescan hit ends the same way: rejected, quarantined
    Attachment.objects.filter(pk=attachment_id).update(status="rejected", reason_code="malware")


def _discard(attachment_id, alice):
    attachment_discard(user=alice, attachment_id=attachment_id)


def _delete(attachment_id, alice):
    attachment_delete(user=alice, attachment_id=attachment_id)


def _release(attachment_id, alice):
    Attachment.objects.filter(pk=attachment_id).update(lifecycle=Lifecycle.COMMITTED, ref="listing:1")
    attachment_delete(user=alice, attachment_id=attachment_id)  # a committed file is released
    assert Attachment.objects.get(pk=attachment_id).lifecycle == Lifecycle.RELEASED


def _gone(attachment_id, alice):
    Attachment.objects.filter(pk=attachment_id).update(lifecycle=Lifecycle.DELETED)


def _staged_and_expired(attachment_id, alice):
    Attachment.objects.filter(pk=attachment_id).update(expires_at=timezone.now() - timedelta(seconds=1))


@pytest.mark.parametrize("change", [_take_down, _reject, _discard, _delete, _release, _gone, _staged_and_expired])
def test_a_link_minted_while_ready_is_404_once_the_file_is_not_served(alice, api, ready_photo, change):
    links = _links(api, alice, ready_photo)
    assert _anonymous().get(_path(links["thumbnail"])).status_code == 200
    change(ready_photo, alice)
    for name in ("download", "thumbnail"):
        response = _anonymous().get(_path(links[name]))
        assert (response.status_code, _error(response)) == (404, "NOT_FOUND"), name


def test_a_pending_or_rejected_files_signed_link_serves_nothing_even_to_its_owner(alice, api, samples):
    pending = upload(api(alice), jpeg_bytes(), filename="new.jpg")
    assert "download" not in _links(api, alice, pending)  # nothing of a pending file is served: no link
    tenant_id = Attachment.objects.get(pk=pending).tenant_id
    minted = signing.delivery_query(
        tenant_id=tenant_id, attachment_id=pending, name="download", exp=signing.delivery_expiry()
    )
    link = f"/api/v1/attachments/{pending}/download?{minted}"
    owners = api(alice).get(link)  # with its header: the owner's own read, told to wait
    assert (owners.status_code, _error(owners)) == (409, "NOT_READY")
    response = _anonymous().get(link)
    assert (response.status_code, _error(response)) == (404, "NOT_FOUND")

    rejected = upload(api(alice), samples.eicar, filename="e.jpg")
    minted = signing.delivery_query(
        tenant_id=Attachment.objects.get(pk=rejected).tenant_id,
        attachment_id=rejected,
        name="download",
        exp=signing.delivery_expiry(),
    )
    assert _anonymous().get(f"/api/v1/attachments/{rejected}/download?{minted}").status_code == 404
    assert run_pipeline(rejected) == "rejected"
    assert "download" not in _links(api, alice, rejected)
    assert _anonymous().get(f"/api/v1/attachments/{rejected}/download?{minted}").status_code == 404


def test_range_through_a_signed_link(alice, api):
    data = pdf_bytes()
    attachment_id = upload(api(alice), data, profile="document", filename="a.pdf", content_type="application/pdf")
    assert run_pipeline(attachment_id) == "ready"
    link = _path(_links(api, alice, attachment_id)["download"])
    partial = _anonymous().get(link, HTTP_RANGE="bytes=0-9")
    assert partial.status_code == 206 and _body(partial) == data[:10]
    assert partial["Content-Range"] == f"bytes 0-9/{len(data)}" and partial["Accept-Ranges"] == "bytes"
    assert _anonymous().get(link, HTTP_RANGE=f"bytes={len(data) + 5}-").status_code == 416


def test_header_reads_are_unchanged_and_either_credential_suffices(alice, bob, mallory, api, ready_photo, client):
    plain = f"/api/v1/attachments/{ready_photo}/download"
    assert api(bob).get(plain).status_code == 200
    missing = _anonymous().get(plain)
    assert (missing.status_code, _error(missing)) == (401, "NOT_AUTHENTICATED")
    assert missing["WWW-Authenticate"] == 'Token realm="api"'
    assert api(mallory).get(plain).status_code == 404
    signed = _path(_links(api, alice, ready_photo)["download"])
    assert api(bob).get(signed).status_code == 200
    assert api(bob).get(_with(signed, exp="1000")).status_code == 200  # bob's header is enough on its own
    # The link is enough on its own too, whoever holds it: a header does not take that away.
    assert api(mallory).get(signed).status_code == 200
    assert _error(api(mallory).get(_with(signed, exp="1000"))) == "SIGNATURE_INVALID"
    staff = get_user_model().objects.create_superuser("root", password="pw-root")  # in no tenant
    client.force_login(staff)
    assert client.get(signed).status_code == 200
    assert client.get(plain).status_code == 401


def test_the_upload_pages_session_reads_the_signed_thumbnail_link(alice, api, ready_photo, client):
    # upload.js fetches links.thumbnail with the session cookie and shows it as a blob: URL.
    client.force_login(alice)
    link = _links(api, alice, ready_photo)["thumbnail"]
    response = client.get(_path(link))
    assert response.status_code == 200 and _body(response)[:4] == b"RIFF"


def test_signed_links_are_redacted_in_logs(alice, api, ready_photo):
    link = _links(api, alice, ready_photo)["thumbnail"]
    sig = _query(link)["sig"]
    line = redact(f'{{"event": "GET {link}", "url": "{link}"}}')
    assert sig not in line and "sig=[redacted]" in line
    assert _query(link)["exp"] in line  # only the credential goes
