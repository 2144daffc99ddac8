"""Who may see and do what in the moderation console."""

import pytest
from django.test import Client

from attachments.models import Attachment

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/attachments/attachment/"


def _change(pk):
    return f"/admin/attachments/attachment/{pk}/change/"


def _moderate(pk, action):
    return f"/admin/attachments/attachment/{pk}/moderate/{action}/"


def test_anonymous_is_sent_to_the_login_page():
    for url in (CHANGELIST, "/admin/dashboard/", "/admin/attachments/deadletter/"):
        response = Client().get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/admin/login/")


def test_tenant_user_can_sign_in_for_the_upload_page_but_not_use_the_admin(alice):
    client = Client()
    response = client.post("/admin/login/?next=/", {"username": "alice", "password": "pw-alice", "next": "/"})
    assert response.status_code == 302 and response["Location"] == "/"
    assert client.get("/").status_code == 200
    for url in (CHANGELIST, "/admin/dashboard/", "/admin/"):
        assert client.get(url).status_code == 302  # back to the login page: not staff


def test_moderator_sees_attachments_and_every_action(moderator, ready_image, browser_for):
    client = browser_for(moderator)
    listing = client.get(CHANGELIST)
    assert listing.status_code == 200
    html = listing.content.decode()
    for action in ("moderate_requeue", "moderate_rescan", "moderate_take_down", "moderate_restore", "moderate_discard"):
        assert f'value="{action}"' in html
    detail = client.get(_change(ready_image)).content.decode()
    assert 'data-action="take_down"' in detail and 'data-action="rescan"' in detail
    assert 'data-action="restore"' not in detail and 'data-action="requeue"' not in detail  # not applicable
    assert "sunset.jpg" in detail
    assert client.get("/admin/dashboard/").status_code == 200
    assert client.get("/admin/attachments/deadletter/").status_code == 200


def test_moderator_cannot_change_users_groups_or_tenants(moderator, browser_for):
    client = browser_for(moderator)
    for url in (
        "/admin/auth/user/",
        "/admin/auth/group/",
        "/admin/auth/user/add/",
        "/admin/attachments/tenant/",
        "/admin/attachments/membership/",
    ):
        assert client.get(url).status_code == 403, url


def test_moderator_cannot_edit_an_attachment_directly(moderator, ready_image, browser_for):
    client = browser_for(moderator)
    response = client.post(_change(ready_image), {"filename": "renamed.jpg", "status": "ready"})
    assert response.status_code == 403
    assert Attachment.objects.get(pk=ready_image).filename == "sunset.jpg"
    assert client.get("/admin/attachments/attachment/add/").status_code == 403
    assert client.get(f"/admin/attachments/attachment/{ready_image}/delete/").status_code == 403


def test_staff_without_moderate_permission_cannot_take_down(viewer, ready_image, browser_for):
    client = browser_for(viewer)
    listing = client.get(CHANGELIST)
    assert listing.status_code == 200
    assert "moderate_take_down" not in listing.content.decode()
    assert 'data-action="take_down"' not in client.get(_change(ready_image)).content.decode()
    assert client.get(_moderate(ready_image, "take_down")).status_code == 403
    assert client.post(_moderate(ready_image, "take_down"), {"note": "x"}).status_code == 403
    # The bulk action is not offered, so posting it does nothing.
    client.post(
        CHANGELIST, {"action": "moderate_take_down", "_selected_action": [ready_image], "post": "yes", "note": "abuse"}
    )
    assert Attachment.objects.get(pk=ready_image).status == "ready"


def test_staff_without_any_attachment_permission_sees_nothing(make_user, ready_image, browser_for):
    client = browser_for(make_user("intern", tenant="staff", staff=True))
    assert client.get(CHANGELIST).status_code == 403
    assert client.get("/admin/dashboard/").status_code == 403
    assert client.get(f"/admin/attachments/attachment/{ready_image}/thumbnail/").status_code == 403


def test_staff_thumbnail_is_the_derivative_with_the_serving_headers(moderator, ready_image, browser_for):
    response = browser_for(moderator).get(f"/admin/attachments/attachment/{ready_image}/thumbnail/")
    assert response.status_code == 200
    body = b"".join(response.streaming_content)
    assert body[:4] == b"RIFF" and body[8:12] == b"WEBP"  # the thumbnail, never the original JPEG
    assert response["Content-Type"] == "image/webp"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Security-Policy"] == "default-src 'none'; sandbox"
    assert response["Content-Disposition"].startswith("inline;")


def test_no_thumbnail_no_preview(moderator, alice, browser_for):
    from tests.support import client_for, create_intent

    pending = create_intent(client_for(alice), size=10).json()["id"]
    client = browser_for(moderator)
    assert client.get(f"/admin/attachments/attachment/{pending}/thumbnail/").status_code == 404
    assert client.get("/admin/attachments/attachment/not-a-uuid/thumbnail/").status_code in (302, 404)


def test_upload_page_requires_sign_in():
    response = Client().get("/")
    assert response.status_code == 302
    assert response["Location"] == "/admin/login/?next=/"


def test_upload_page_carries_a_csrf_token_and_a_strict_csp(alice, browser_for):
    response = browser_for(alice).get("/")
    html = response.content.decode()
    assert '<meta name="csrf-token" content="' in html
    assert "airlock/upload.js" in html
    assert "airlock/vendor/uppy/uppy.min.js" in html  # vendored: no CDN
    assert "<script>" not in html and "<style" not in html  # nothing inline: script-src and style-src stay 'self'
    csp = response["Content-Security-Policy"]
    assert "script-src 'self';" in csp and "style-src 'self';" in csp and "unsafe" not in csp
    assert "img-src 'self' blob: data:;" in csp  # Uppy's previews (blob:) and its stylesheet's icons (data:)
    assert "csrftoken" in response.cookies
