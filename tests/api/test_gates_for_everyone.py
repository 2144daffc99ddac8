"""No byte of a file that is not `ready` is served to anyone, its owner included, by any path.

The owner of a pending or processing file is told to wait (409 NOT_READY, the
status in `details`) while the resource stays readable; a rejected, failed,
discarded, released or expired file answers 404 as if it did not exist.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from attachments import signing
from attachments.models import Attachment, Derivative, Lifecycle
from attachments.retention.services.release import attachments_release
from attachments.services.lifecycle import attachment_discard, attachments_commit
from attachments.storage import get_gateway
from tests.support import jpeg_bytes, run_pipeline, upload

pytestmark = pytest.mark.django_db

WEBP = "image/webp,*/*"
# Every route that reads a file's bytes (docs/api.md, "Downloads and thumbnails" and "Variants").
RENDITIONS = ["download", "thumbnail", "display", "poster", "variants/small"]


def _signed_name(rendition: str) -> str:
    return rendition.replace("variants/", "variant-")


@pytest.fixture
def photo(alice, api):
    """A ready photo that has every rendition: a thumbnail, a display rendition, a poster, a variant."""
    pk = upload(api(alice), jpeg_bytes((800, 600)), filename="cat.jpg")
    assert run_pipeline(pk) == "ready"
    row = Attachment.objects.get(pk=pk)
    thumbnail = row.derivatives.get(kind="thumbnail")
    for kind in ("display", "poster"):  # a JPEG has neither: copies of the thumbnail stand in
        get_gateway().copy(thumbnail.storage_key, f"{thumbnail.storage_key}.{kind}")
        Derivative.objects.create(
            attachment=row,
            kind=kind,
            storage_key=f"{thumbnail.storage_key}.{kind}",
            content_type="image/webp",
            size=thumbnail.size,
        )
    return row


def _link(row: Attachment, rendition: str) -> str:
    query = signing.delivery_query(
        tenant_id=row.tenant_id, attachment_id=row.pk, name=_signed_name(rendition), exp=signing.delivery_expiry()
    )
    return f"/api/v1/attachments/{row.pk}/{rendition}?{query}"


def _reads(row: Attachment, rendition: str, owner_client):
    """Each way of asking for the rendition's bytes: (how, response)."""
    plain = f"/api/v1/attachments/{row.pk}/{rendition}"
    return [
        ("header", owner_client.get(plain, HTTP_ACCEPT=WEBP)),
        ("header+range", owner_client.get(plain, HTTP_ACCEPT=WEBP, HTTP_RANGE="bytes=0-9")),
        ("header+signed link", owner_client.get(_link(row, rendition), HTTP_ACCEPT=WEBP)),
        ("signed link alone", Client().get(_link(row, rendition), HTTP_ACCEPT=WEBP)),
    ]


def _served_nothing(response) -> bool:
    """A JSON error, no file bytes, no redirect to storage."""
    return (
        response["Content-Type"] == "application/json"
        and "Location" not in response
        and "Content-Disposition" not in response
        and not response.streaming
    )


@pytest.mark.parametrize("rendition", RENDITIONS)
def test_a_ready_file_serves_every_rendition_by_every_path(photo, alice, api, rendition):
    for how, response in _reads(photo, rendition, api(alice)):
        assert response.status_code in (200, 206), (how, response.status_code)


@pytest.mark.parametrize("status", ["pending", "processing"])
@pytest.mark.parametrize("rendition", RENDITIONS)
def test_a_file_being_checked_tells_its_owner_to_wait_and_serves_no_byte(photo, alice, bob, api, rendition, status):
    Attachment.objects.filter(pk=photo.pk).update(status=status)
    for how, response in _reads(photo, rendition, api(alice)):
        assert _served_nothing(response), how
        if how == "signed link alone":  # a link stands for the tenant's read, never the owner's
            assert (response.status_code, response.json()["error"]["code"]) == (404, "NOT_FOUND"), how
        else:
            assert response.status_code == 409, (how, response.status_code)
            assert response.json()["error"]["code"] == "NOT_READY"
            assert response.json()["error"]["details"] == {"status": status}
    # Another member of the tenant does not learn that it exists.
    other = api(bob).get(f"/api/v1/attachments/{photo.pk}/{rendition}", HTTP_ACCEPT=WEBP)
    assert (other.status_code, other.json()["error"]["code"]) == (404, "NOT_FOUND") and _served_nothing(other)
    # The resource itself stays readable, and says the file cannot be used yet.
    body = api(alice).get(f"/api/v1/attachments/{photo.pk}").json()
    assert (body["status"], body["available"]) == (status, False)
    assert set(body["links"]) == {"self"}


def _rejected(row, owner):
    Attachment.objects.filter(pk=row.pk).update(status="rejected", reason_code="malware")


def _failed(row, owner):
    Attachment.objects.filter(pk=row.pk).update(status="failed", reason_code="infrastructure")


def _discarded(row, owner):
    attachment_discard(user=owner, attachment_id=row.pk)


def _released(row, owner):
    attachments_commit(owner=owner, ids=[str(row.pk)], ref="listing:1")
    attachments_release(user=owner, ids=[str(row.pk)])


def _expired(row, owner):
    Attachment.objects.filter(pk=row.pk).update(expires_at=timezone.now() - timedelta(seconds=1))


def _discarded_while_pending(row, owner):
    Attachment.objects.filter(pk=row.pk).update(status="pending")
    attachment_discard(user=owner, attachment_id=row.pk)


def _expired_while_processing(row, owner):
    Attachment.objects.filter(pk=row.pk).update(status="processing", expires_at=timezone.now() - timedelta(seconds=1))


@pytest.mark.parametrize(
    "change",
    [_rejected, _failed, _discarded, _released, _expired, _discarded_while_pending, _expired_while_processing],
)
@pytest.mark.parametrize("rendition", RENDITIONS)
def test_a_file_that_is_not_served_is_404_by_every_path(photo, alice, api, rendition, change):
    change(photo, alice)
    for how, response in _reads(photo, rendition, api(alice)):
        assert (response.status_code, response.json()["error"]["code"]) == (404, "NOT_FOUND"), how
        assert _served_nothing(response), how


def test_the_not_ready_body(alice, api):
    pk = upload(api(alice), jpeg_bytes(), filename="new.jpg")
    Attachment.objects.filter(pk=pk).update(status="processing")
    response = api(alice).get(f"/api/v1/attachments/{pk}/download")
    assert response.status_code == 409
    assert response.json() == {
        "error": {
            "code": "NOT_READY",
            "message": "The file is not ready: nothing is served until it is checked.",
            "details": {"status": "processing"},
        }
    }


def test_a_subject_confined_request_learns_404_for_another_subjects_pending_file(alice, api):
    client = api(alice)
    client.credentials(HTTP_AUTHORIZATION=f"Token {alice.api_token}", HTTP_AIRLOCK_SUBJECT="guest-1")
    pk = upload(client, jpeg_bytes(), filename="g1.jpg")
    assert client.get(f"/api/v1/attachments/{pk}/download").status_code == 409  # its own: wait
    other = api(alice)
    other.credentials(HTTP_AUTHORIZATION=f"Token {alice.api_token}", HTTP_AIRLOCK_SUBJECT="guest-2")
    response = other.get(f"/api/v1/attachments/{pk}/download")
    assert (response.status_code, response.json()["error"]["code"]) == (404, "NOT_FOUND")


# --- available: true exactly when a download would succeed for the owner now ----------------------


def _committed(row, owner):
    attachments_commit(owner=owner, ids=[str(row.pk)], ref="listing:2")


def _pending(row, owner):
    Attachment.objects.filter(pk=row.pk).update(status="pending")


def _processing(row, owner):
    Attachment.objects.filter(pk=row.pk).update(status="processing")


def _ready(row, owner):
    pass


@pytest.mark.parametrize(
    ("change", "available"),
    [
        (_ready, True),
        (_committed, True),
        (_pending, False),
        (_processing, False),
        (_rejected, False),
        (_failed, False),
        (_discarded, False),
        (_released, False),  # within its grace: restorable, not servable
        (_expired, False),
    ],
)
def test_available_is_true_exactly_when_the_owners_download_succeeds(photo, alice, api, change, available):
    change(photo, alice)
    client = api(alice)
    body = client.get(f"/api/v1/attachments/{photo.pk}").json()
    assert body["available"] is available
    assert ("download" in body["links"]) is available
    downloaded = client.get(f"/api/v1/attachments/{photo.pk}/download")
    assert (downloaded.status_code == 200) is available
    listed = client.get(f"/api/v1/attachments?ids={photo.pk}&include=removed").json()["results"]
    assert [r["available"] for r in listed] == [available]
    if change is _released:
        row = Attachment.objects.get(pk=photo.pk)
        assert row.lifecycle == Lifecycle.RELEASED and row.expires_at > timezone.now()


# --- the console: staff open a file only through its audited download -------------------------------


@pytest.fixture
def moderator(make_user):
    from attachments.services.staff import moderator_group_ensure, platform_staff_group_ensure

    user = make_user("mod", tenant="staff", staff=True)
    user.groups.add(moderator_group_ensure(), platform_staff_group_ensure())
    return user


@pytest.mark.parametrize("status", ["pending", "processing"])
def test_the_console_serves_no_byte_of_a_file_being_checked(photo, moderator, status):
    from attachments.models import TransitionLog
    from attachments.services.audit import STAFF_DOWNLOAD

    Attachment.objects.filter(pk=photo.pk).update(status=status)
    console = Client()
    console.force_login(moderator)
    for what in ("download", "media"):
        assert console.get(f"/admin/attachments/attachment/{photo.pk}/{what}/").status_code == 404, what
    # A staff session on the API is nobody's read: it is not in the file's tenant.
    assert console.get(f"/api/v1/attachments/{photo.pk}/download").status_code == 404
    assert not TransitionLog.objects.filter(attachment_id=photo.pk, transition=STAFF_DOWNLOAD).exists()


def test_a_taken_down_file_is_served_to_staff_only_through_the_audited_download(photo, alice, api, moderator):
    from attachments.models import TransitionLog
    from attachments.services.audit import STAFF_DOWNLOAD
    from attachments.services.moderation import attachment_take_down

    attachment_take_down(attachment_id=photo.pk, actor="staff:mod", note="abuse")
    for how, response in _reads(photo, "download", api(alice)):
        assert response.status_code == 404, how
    console = Client()
    console.force_login(moderator)
    response = console.get(f"/admin/attachments/attachment/{photo.pk}/download/")
    assert response.status_code == 200 and response["Content-Disposition"].startswith("attachment;")
    [entry] = TransitionLog.objects.filter(attachment_id=photo.pk, transition=STAFF_DOWNLOAD)
    assert entry.actor == "staff:mod"
