"""The tus 1.0.0 protocol in-process: headers, errors, offsets, completion into intake (local storage).

The same server over HTTP, with a real tus client (tuspy), is tests/e2e/test_tus.py.
"""

from __future__ import annotations

import base64
import hashlib
from datetime import timedelta

import pytest
from django.utils import timezone

from attachments.models import Attachment, StorageEvent, TusUpload
from attachments.uploads.api import parse_metadata

TUS = {"HTTP_TUS_RESUMABLE": "1.0.0"}


def _meta(**values: str) -> str:
    return ",".join(f"{k} {base64.b64encode(v.encode()).decode()}" for k, v in values.items())


def _create(client, data_len: int, *, profile="image", content_type="image/jpeg", filename="cat.jpg", **extra):
    return client.post(
        "/api/v1/tus/",
        **TUS,
        HTTP_UPLOAD_LENGTH=str(data_len),
        HTTP_UPLOAD_METADATA=_meta(profile=profile, filename=filename, content_type=content_type),
        **extra,
    )


def _patch(client, url: str, body: bytes, offset: int, **extra):
    return client.generic(
        "PATCH",
        url,
        body,
        content_type="application/offset+octet-stream",
        **TUS,
        HTTP_UPLOAD_OFFSET=str(offset),
        **extra,
    )


def _path(response) -> str:
    location = response["Location"]
    assert location.startswith("http://testserver/api/v1/tus/")
    return location.removeprefix("http://testserver")


@pytest.fixture
def alice_client(alice, api):
    return api(alice)


def test_options_needs_no_auth_and_lists_the_extensions(api, db):
    response = api().options("/api/v1/tus/")
    assert response.status_code == 204
    assert response["Tus-Resumable"] == "1.0.0"
    assert response["Tus-Version"] == "1.0.0"
    assert response["Tus-Extension"] == "creation,creation-with-upload,termination,expiration,checksum"
    assert "sha256" in response["Tus-Checksum-Algorithm"].split(",")
    assert int(response["Tus-Max-Size"]) == 1024**3  # the media profile's limit, the largest


def test_creation_makes_an_intent_row_and_head_reports_it(alice_client, alice, samples):
    data = samples.jpeg((64, 48))
    created = _create(alice_client, len(data))
    assert created.status_code == 201, created.content
    assert created["Tus-Resumable"] == "1.0.0"
    path = _path(created)
    attachment = Attachment.objects.get(pk=path.rsplit("/", 1)[1])
    assert attachment.owner == alice and attachment.status == "pending" and attachment.uploaded_at is None
    assert attachment.declared_size == len(data) and attachment.declared_type == "image/jpeg"
    head = alice_client.head(path, **TUS)
    assert head.status_code == 200
    assert head["Upload-Offset"] == "0" and head["Upload-Length"] == str(len(data))
    assert head["Cache-Control"] == "no-store"
    assert parse_metadata(head["Upload-Metadata"]) == {
        "profile": "image",
        "filename": "cat.jpg",
        "content_type": "image/jpeg",
    }
    assert "GMT" in head["Upload-Expires"]


def test_patches_append_and_the_last_byte_hands_the_file_to_intake(alice_client, samples, storage_root):
    data = samples.jpeg((64, 48))
    path = _path(_create(alice_client, len(data)))
    first = _patch(alice_client, path, data[:100], 0)
    assert first.status_code == 204 and first["Upload-Offset"] == "100"
    pk = path.rsplit("/", 1)[1]
    attachment = Attachment.objects.get(pk=pk)
    assert attachment.uploaded_at is None
    assert not (storage_root / attachment.storage_key).exists()  # staged, not servable
    assert (storage_root / ".tus" / pk).stat().st_size == 100
    second = _patch(alice_client, path, data[100:], 100)
    assert second.status_code == 204 and second["Upload-Offset"] == str(len(data))
    assert "Upload-Expires" not in second
    attachment.refresh_from_db()
    assert attachment.uploaded_at is not None
    assert (storage_root / attachment.storage_key).read_bytes() == data
    assert not (storage_root / ".tus" / pk).exists()
    assert StorageEvent.objects.get(key=attachment.storage_key).outcome == "started"
    assert TusUpload.objects.get(pk=pk).state == "complete"
    # The ordinary endpoints take over.
    assert alice_client.get(f"/api/v1/attachments/{pk}").json()["status"] in ("pending", "processing", "ready")


def test_a_patch_that_brings_no_byte_keeps_nothing_alive(alice_client, samples):
    """Upload-Expires restarts with a PATCH that moved the offset, not with an empty one (an idle client)."""
    data = samples.jpeg()
    path = _path(_create(alice_client, len(data)))
    pk = path.rsplit("/", 1)[1]
    soon = timezone.now() + timedelta(seconds=5)
    TusUpload.objects.filter(pk=pk).update(expires_at=soon)
    touched = Attachment.objects.get(pk=pk).updated_at
    assert _patch(alice_client, path, b"", 0, CONTENT_LENGTH="0").status_code == 204
    assert TusUpload.objects.get(pk=pk).expires_at == soon
    assert Attachment.objects.get(pk=pk).updated_at == touched  # the never-uploaded clock too
    assert _patch(alice_client, path, data[:30], 0).status_code == 204
    assert TusUpload.objects.get(pk=pk).expires_at > soon + timedelta(minutes=1)


def test_wrong_offset_is_409_and_changes_nothing(alice_client, samples):
    data = samples.jpeg()
    path = _path(_create(alice_client, len(data)))
    assert _patch(alice_client, path, data[:10], 0).status_code == 204
    stale = _patch(alice_client, path, data[:10], 0)
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "OFFSET_MISMATCH"
    assert alice_client.head(path, **TUS)["Upload-Offset"] == "10"


def test_more_bytes_than_upload_length_are_refused(alice_client, samples):
    data = samples.jpeg()
    path = _path(_create(alice_client, 50))
    too_many = _patch(alice_client, path, data[:51], 0)
    assert too_many.status_code == 413 and too_many.json()["error"]["code"] == "TOO_LARGE"
    assert alice_client.head(path, **TUS)["Upload-Offset"] == "0"


def test_upload_length_over_the_profile_is_413(alice_client):
    response = _create(alice_client, 25 * 1024 * 1024 + 1)
    assert response.status_code == 413 and response.json()["error"]["code"] == "TOO_LARGE"
    assert response.json()["error"]["details"]["max_bytes"] == 25 * 1024 * 1024
    assert not Attachment.objects.exists()


def test_metadata_must_name_the_profile(alice_client):
    metadata = _meta(filename="a.jpg", content_type="image/jpeg")
    response = alice_client.post("/api/v1/tus/", **TUS, HTTP_UPLOAD_LENGTH="10", HTTP_UPLOAD_METADATA=metadata)
    assert response.status_code == 400 and "profile" in response.json()["error"]["details"]
    assert not Attachment.objects.exists()


@pytest.mark.parametrize("metadata", [_meta(profile="image", filename="IMG_0001.HEIC"), "profile aW1hZ2U=,filetype"])
def test_metadata_without_a_type_is_accepted_and_the_bytes_decide(alice_client, metadata):
    """A browser gives a .HEIC photo no type: the upload is created with none declared."""
    response = alice_client.post("/api/v1/tus/", **TUS, HTTP_UPLOAD_LENGTH="10", HTTP_UPLOAD_METADATA=metadata)
    assert response.status_code == 201, response.content
    assert Attachment.objects.get().declared_type == ""


def test_type_outside_the_profile_is_refused(alice_client):
    response = _create(alice_client, 10, content_type="application/pdf", filename="invoice.pdf")
    assert response.status_code == 400 and response.json()["error"]["code"] == "TYPE_NOT_ALLOWED"


def test_deferred_length_and_bad_headers_are_400(alice_client):
    deferred = alice_client.post(
        "/api/v1/tus/",
        **TUS,
        HTTP_UPLOAD_DEFER_LENGTH="1",
        HTTP_UPLOAD_METADATA=_meta(profile="image", content_type="image/jpeg"),
    )
    assert deferred.status_code == 400
    assert (
        alice_client.post(
            "/api/v1/tus/", **TUS, HTTP_UPLOAD_LENGTH="10", HTTP_UPLOAD_METADATA="profile !!!"
        ).status_code
        == 400
    )
    bad_length = alice_client.post(
        "/api/v1/tus/",
        **TUS,
        HTTP_UPLOAD_LENGTH="-1",
        HTTP_UPLOAD_METADATA=_meta(profile="image", content_type="image/jpeg"),
    )
    assert bad_length.status_code == 400


def test_unsupported_version_is_412_before_anything_else(alice_client, api, db):
    response = alice_client.post("/api/v1/tus/", HTTP_TUS_RESUMABLE="0.2.2", HTTP_UPLOAD_LENGTH="10")
    assert response.status_code == 412 and response["Tus-Version"] == "1.0.0"
    assert response.json()["error"]["code"] == "TUS_VERSION_UNSUPPORTED"
    assert api().post("/api/v1/tus/", HTTP_UPLOAD_LENGTH="10").status_code == 412
    assert not Attachment.objects.exists()


def test_anonymous_is_401(api, db):
    response = api().post("/api/v1/tus/", **TUS, HTTP_UPLOAD_LENGTH="10")
    assert response.status_code == 401 and response["Tus-Resumable"] == "1.0.0"


def test_patch_needs_the_offset_media_type(alice_client, samples):
    path = _path(_create(alice_client, 10))
    response = alice_client.generic(
        "PATCH", path, b"0123456789", content_type="application/octet-stream", **TUS, HTTP_UPLOAD_OFFSET="0"
    )
    assert response.status_code == 415 and response.json()["error"]["code"] == "UNSUPPORTED_MEDIA_TYPE"


@pytest.mark.parametrize("algorithm", ["sha1", "sha256"])
def test_checksum_mismatch_is_460_and_the_chunk_is_dropped(alice_client, samples, storage_root, algorithm):
    data = samples.jpeg()
    path = _path(_create(alice_client, len(data)))
    good = base64.b64encode(hashlib.new(algorithm, data[:40]).digest()).decode()
    bad = base64.b64encode(hashlib.new(algorithm, b"something else").digest()).decode()
    refused = _patch(alice_client, path, data[:40], 0, HTTP_UPLOAD_CHECKSUM=f"{algorithm} {bad}")
    assert refused.status_code == 460 and refused.json()["error"]["code"] == "CHECKSUM_MISMATCH"
    assert alice_client.head(path, **TUS)["Upload-Offset"] == "0"
    assert (storage_root / ".tus" / path.rsplit("/", 1)[1]).stat().st_size == 0
    accepted = _patch(alice_client, path, data[:40], 0, HTTP_UPLOAD_CHECKSUM=f"{algorithm} {good}")
    assert accepted.status_code == 204 and accepted["Upload-Offset"] == "40"
    unknown = _patch(alice_client, path, data[40:50], 40, HTTP_UPLOAD_CHECKSUM=f"crc32 {good}")
    assert unknown.status_code == 400


def test_creation_with_upload(alice_client, samples):
    data = samples.jpeg()
    response = alice_client.post(
        "/api/v1/tus/",
        data[:64],
        content_type="application/offset+octet-stream",
        **TUS,
        HTTP_UPLOAD_LENGTH=str(len(data)),
        HTTP_UPLOAD_METADATA=_meta(profile="image", content_type="image/jpeg"),
    )
    assert response.status_code == 201 and response["Upload-Offset"] == "64"
    assert alice_client.head(_path(response), **TUS)["Upload-Offset"] == "64"


def test_method_override(alice_client, samples):
    data = samples.jpeg()
    path = _path(_create(alice_client, len(data)))
    response = alice_client.post(
        path,
        data[:5],
        content_type="application/offset+octet-stream",
        **TUS,
        HTTP_UPLOAD_OFFSET="0",
        HTTP_X_HTTP_METHOD_OVERRIDE="PATCH",
    )
    assert response.status_code == 204 and response["Upload-Offset"] == "5"


def test_only_the_owner_sees_the_upload(alice_client, bob, mallory, api, samples):
    data = samples.jpeg()
    path = _path(_create(alice_client, len(data)))
    for other in (bob, mallory):
        client = api(other)
        assert client.head(path, **TUS).status_code == 404
        assert _patch(client, path, data[:10], 0).status_code == 404
        assert client.delete(path, **TUS).status_code == 404
    assert alice_client.head(path, **TUS)["Upload-Offset"] == "0"
    assert alice_client.head("/api/v1/tus/not-a-uuid", **TUS).status_code == 404


def test_termination_then_404_and_the_intent_is_discarded(alice_client, samples, storage_root):
    data = samples.jpeg()
    path = _path(_create(alice_client, len(data)))
    pk = path.rsplit("/", 1)[1]
    assert _patch(alice_client, path, data[:30], 0).status_code == 204
    assert alice_client.delete(path, **TUS).status_code == 204
    assert alice_client.head(path, **TUS).status_code == 404
    assert _patch(alice_client, path, data[30:], 30).status_code == 404
    assert not (storage_root / ".tus" / pk).exists()
    assert Attachment.objects.get(pk=pk).lifecycle == "discarded"


def test_termination_of_a_held_upload_is_refused_and_the_transfer_goes_on(alice_client, samples, storage_root):
    from attachments.retention.services.holds import attachment_hold_set

    data = samples.jpeg()
    path = _path(_create(alice_client, len(data)))
    pk = path.rsplit("/", 1)[1]
    assert _patch(alice_client, path, data[:30], 0).status_code == 204
    attachment_hold_set(attachment_ids=[pk], actor="staff:root", reason="litigation")
    refused = alice_client.delete(path, **TUS)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "LEGAL_HOLD"
    assert TusUpload.objects.get(pk=pk).state == "active"  # not ended: the sweep would drop its bytes
    assert alice_client.head(path, **TUS)["Upload-Offset"] == "30"
    assert _patch(alice_client, path, data[30:], 30).status_code == 204
    assert Attachment.objects.get(pk=pk).lifecycle == "staged"


def test_expired_upload_is_410_and_the_sweeper_removes_its_bytes(alice_client, samples, storage_root):
    from sweeper.sweep import sweep_expired

    data = samples.jpeg()
    path = _path(_create(alice_client, len(data)))
    pk = path.rsplit("/", 1)[1]
    assert _patch(alice_client, path, data[:30], 0).status_code == 204
    TusUpload.objects.filter(pk=pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert alice_client.head(path, **TUS).status_code == 410
    assert _patch(alice_client, path, data[30:], 30).status_code == 410
    assert (storage_root / ".tus" / pk).exists()
    report = sweep_expired(trigger="test")
    assert report.tus_expired == 1
    assert not (storage_root / ".tus" / pk).exists()
    assert TusUpload.objects.get(pk=pk).state == "expired"
    assert alice_client.head(path, **TUS).status_code == 410


def test_an_expired_upload_of_a_held_file_keeps_its_bytes_until_the_hold_is_cleared(
    alice_client, samples, storage_root
):
    from attachments.retention.services.holds import attachment_hold_clear, attachment_hold_set
    from sweeper.sweep import sweep_expired

    data = samples.jpeg()
    path = _path(_create(alice_client, len(data)))
    pk = path.rsplit("/", 1)[1]
    assert _patch(alice_client, path, data[:30], 0).status_code == 204
    attachment_hold_set(attachment_ids=[pk], actor="staff:root", reason="litigation")
    TusUpload.objects.filter(pk=pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert sweep_expired(trigger="test").tus_expired == 0
    assert (storage_root / ".tus" / pk).exists() and TusUpload.objects.get(pk=pk).staged
    attachment_hold_clear(attachment_ids=[pk], actor="staff:root")
    assert sweep_expired(trigger="test").tus_expired == 1
    assert not (storage_root / ".tus" / pk).exists()


def test_sweeper_brakes_hold_the_expiry(alice_client, samples, storage_root):
    from sweeper.control import sweeper_control_set
    from sweeper.sweep import sweep_expired

    data = samples.jpeg()
    path = _path(_create(alice_client, len(data)))
    pk = path.rsplit("/", 1)[1]
    assert _patch(alice_client, path, data[:30], 0).status_code == 204
    TusUpload.objects.filter(pk=pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    sweeper_control_set(dry_run=True, actor="test")
    assert sweep_expired(trigger="test").tus_expired == 1  # would remove
    assert (storage_root / ".tus" / pk).exists()
    sweeper_control_set(dry_run=False, killswitch=True, actor="test")
    sweep_expired(trigger="test")
    assert (storage_root / ".tus" / pk).exists()
    sweeper_control_set(killswitch=False, actor="test")
    assert sweep_expired(trigger="test").tus_expired == 1
    assert not (storage_root / ".tus" / pk).exists()


def test_a_held_upload_is_423_for_a_second_writer(alice_client, samples):
    data = samples.jpeg()
    path = _path(_create(alice_client, len(data)))
    pk = path.rsplit("/", 1)[1]
    TusUpload.objects.filter(pk=pk).update(lock_token="00000000-0000-0000-0000-000000000001", locked_at=timezone.now())
    busy = _patch(alice_client, path, data[:10], 0)
    assert busy.status_code == 423 and busy.json()["error"]["code"] == "UPLOAD_LOCKED"
    # A claim nobody renewed (its server died) is taken over.
    TusUpload.objects.filter(pk=pk).update(locked_at=timezone.now() - timedelta(minutes=5))
    assert _patch(alice_client, path, data[:10], 0).status_code == 204


def test_creation_counts_against_the_pending_cap(alice_client, settings):
    settings.AIRLOCK_RATE_LIMITS = settings.AIRLOCK_RATE_LIMITS.replace(pending_per_subject=2)
    assert _create(alice_client, 10).status_code == 201
    assert _create(alice_client, 10).status_code == 201
    refused = _create(alice_client, 10)
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "RATE_LIMITED"


def test_a_completion_lost_to_a_crash_is_finished_by_the_next_head(alice_client, samples, storage_root, monkeypatch):
    from attachments.uploads.services import tus as service

    data = samples.jpeg()
    path = _path(_create(alice_client, len(data)))
    pk = path.rsplit("/", 1)[1]
    real = service._complete

    def crash(upload, *, token, fence=None):
        raise SystemExit("the server died before handing the file to intake")

    monkeypatch.setattr(service, "_complete", crash)
    with pytest.raises(SystemExit):
        _patch(alice_client, path, data, 0)
    monkeypatch.setattr(service, "_complete", real)
    upload = TusUpload.objects.get(pk=pk)
    assert (upload.state, upload.offset, upload.lock_token) == ("active", len(data), None)
    assert Attachment.objects.get(pk=pk).uploaded_at is None
    # The client's HEAD says it is all there; the server finishes the job on the way.
    head = alice_client.head(path, **TUS)
    assert head.status_code == 200 and head["Upload-Offset"] == str(len(data))
    assert TusUpload.objects.get(pk=pk).state == "complete"
    attachment = Attachment.objects.get(pk=pk)
    assert attachment.uploaded_at is not None
    assert (storage_root / attachment.storage_key).read_bytes() == data


def test_the_sweep_finishes_a_stranded_upload_instead_of_deleting_it(alice_client, samples, storage_root, monkeypatch):
    from attachments.uploads.services import tus as service
    from sweeper.sweep import sweep_expired

    data = samples.jpeg()
    path = _path(_create(alice_client, len(data)))
    pk = path.rsplit("/", 1)[1]
    real = service._complete
    monkeypatch.setattr(
        service, "_complete", lambda upload, *, token, fence=None: (_ for _ in ()).throw(SystemExit("died"))
    )
    with pytest.raises(SystemExit):
        _patch(alice_client, path, data, 0)
    monkeypatch.setattr(service, "_complete", real)
    TusUpload.objects.filter(pk=pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert sweep_expired(trigger="test").tus_expired == 0
    attachment = Attachment.objects.get(pk=pk)
    assert TusUpload.objects.get(pk=pk).state == "complete" and attachment.uploaded_at is not None
    assert (storage_root / attachment.storage_key).read_bytes() == data


def test_creation_is_shed_with_intents_but_granted_uploads_still_take_bytes(alice_client, samples, settings):
    from attachments.models import Status
    from attachments.services import backlog

    settings.AIRLOCK_MAX_BACKLOG_SECONDS = 60
    data = samples.jpeg()
    granted = _path(_create(alice_client, len(data)))
    for _ in range(backlog.QUEUE_DEPTH):
        pk = _path(_create(alice_client, 10)).rsplit("/", 1)[1]
        Attachment.objects.filter(pk=pk).update(
            uploaded_at=timezone.now() - timedelta(seconds=90), status=Status.PROCESSING
        )
    backlog.forget()
    try:
        shed = _create(alice_client, len(data))
        assert shed.status_code == 503 and shed.json()["error"]["code"] == "UNAVAILABLE" and shed["Retry-After"]
        assert _patch(alice_client, granted, data, 0).status_code == 204
    finally:
        backlog.forget()


def test_location_is_built_from_the_public_url_not_the_host_header(alice_client, settings):
    settings.AIRLOCK_PUBLIC_URL = "https://files.example.com"
    response = _create(alice_client, 10, HTTP_HOST="localhost")
    assert response.status_code == 201
    assert response["Location"].startswith("https://files.example.com/api/v1/tus/")


def test_a_committed_intent_whose_tus_bytes_keep_coming_is_not_ended_as_never_uploaded(alice_client, samples, settings):
    from attachments.uploads.services.never_uploaded import never_uploaded

    data = samples.jpeg()
    path = _path(_create(alice_client, len(data)))
    pk = path.rsplit("/", 1)[1]
    assert (
        alice_client.post("/api/v1/attachments/commit", {"ids": [pk], "ref": "listing:1"}, format="json").status_code
        == 200
    )
    long_ago = timezone.now() - timedelta(
        seconds=settings.AIRLOCK_URL_SECONDS.upload + settings.AIRLOCK_LIFECYCLE_SECONDS.upload_grace + 60
    )
    Attachment.objects.filter(pk=pk).update(created_at=long_ago, updated_at=long_ago)
    assert never_uploaded(timezone.now()).filter(pk=pk).exists()  # as things stand it would be ended
    assert _patch(alice_client, path, data[:20], 0).status_code == 204  # but a PATCH restarts the clock
    assert not never_uploaded(timezone.now()).filter(pk=pk).exists()


@pytest.mark.django_db(transaction=True)
def test_a_patch_lets_go_of_its_database_connection_only_where_connections_are_shared(monkeypatch):
    """PostgreSQL: back to the pool while the body streams in. SQLite: kept (closing costs a WAL checkpoint)."""
    from django.db import connection

    from attachments.services.connections import give_connection_back

    closed: list[bool] = []
    monkeypatch.setattr(connection, "close", lambda: closed.append(True))
    give_connection_back()
    assert closed == ([] if connection.vendor == "sqlite" else [True])
