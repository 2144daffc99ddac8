"""A download button on a file's page (#32 "See"): gated as the player is, audited with the staff member."""

from __future__ import annotations

import pytest

from attachments.models import Attachment, TransitionLog
from attachments.services.audit import STAFF_DOWNLOAD
from tests.support import client_for, run_pipeline, upload

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/attachments/attachment/"


def _body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def test_a_ready_file_downloads_and_the_download_is_audited_with_the_staff_member(moderator, ready_image, browser_for):
    client = browser_for(moderator)
    page = client.get(f"{CHANGELIST}{ready_image}/change/").content.decode()
    url = f"{CHANGELIST}{ready_image}/download/"
    assert f'<a class="airlock-download" id="airlock-download" href="{url}" download>Download</a>' in page
    response = client.get(url)
    assert response.status_code in (200, 302)  # streamed, or a signed redirect to object storage
    if response.status_code == 200:
        assert response["Content-Disposition"].startswith("attachment;")
        assert len(_body(response)) == Attachment.objects.get(pk=ready_image).size
    [entry] = TransitionLog.objects.filter(attachment_id=ready_image, transition=STAFF_DOWNLOAD)
    assert entry.actor == "staff:mod" and entry.details["size"] == Attachment.objects.get(pk=ready_image).size


def test_a_rejected_file_has_no_download(moderator, alice, browser_for):
    bad = upload(client_for(alice), b"MZ no picture here" * 8, filename="bad.jpg")
    assert run_pipeline(bad) == "rejected"
    client = browser_for(moderator)
    assert "airlock-download" not in client.get(f"{CHANGELIST}{bad}/change/").content.decode()
    assert client.get(f"{CHANGELIST}{bad}/download/").status_code == 404
    assert not TransitionLog.objects.filter(attachment_id=bad, transition=STAFF_DOWNLOAD).exists()


def test_another_tenants_moderator_cannot_download(make_user, ready_image, browser_for):
    from attachments.services.staff import moderator_group_ensure

    outsider = make_user("outsider", tenant="evil", staff=True)
    outsider.groups.add(moderator_group_ensure())
    assert browser_for(outsider).get(f"{CHANGELIST}{ready_image}/download/").status_code == 404
    assert not TransitionLog.objects.filter(transition=STAFF_DOWNLOAD).exists()


def test_staff_without_the_view_permission_cannot_download(make_user, ready_image, browser_for):
    plain = make_user("plain-staff", tenant="acme", staff=True)
    assert browser_for(plain).get(f"{CHANGELIST}{ready_image}/download/").status_code in (302, 403)


def test_a_video_whose_copy_is_a_mov_downloads_named_mov(moderator, alice, browser_for):
    from urllib.parse import parse_qs, urlsplit

    from tests.corpus.make_media import mp4_h264_pcm

    # PCM audio in an MP4: the served copy is a MOV, and the staff download is named for it.
    data = mp4_h264_pcm()
    attachment_id = upload(client_for(alice), data, profile="media", filename="clip.mp4", content_type="video/mp4")
    assert run_pipeline(attachment_id) == "ready"
    assert Attachment.objects.get(pk=attachment_id).content_type == "video/quicktime"
    response = browser_for(moderator).get(f"{CHANGELIST}{attachment_id}/download/")
    if response.status_code == 302:  # object storage: the disposition rides in the signed link
        [disposition] = parse_qs(urlsplit(response["Location"]).query)["response-content-disposition"]
    else:
        assert response.status_code == 200
        disposition = response["Content-Disposition"]
    assert disposition == "attachment; filename=\"clip.mov\"; filename*=UTF-8''clip.mov"
