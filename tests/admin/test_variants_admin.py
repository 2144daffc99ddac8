"""The change page's variants: which exist (name, format, size, created), purging them (confirmed, audited,
moderators only, one file or a selection), and the preview's `srcset` over them."""

from __future__ import annotations

import re

import pytest
from django.contrib.admin.models import LogEntry

from attachments.models import Attachment, Derivative, TransitionLog
from attachments.services.moderation import attachment_take_down
from attachments.storage import get_gateway
from tests.support import client_for, jpeg_bytes, pdf_bytes, run_pipeline, upload

pytestmark = pytest.mark.django_db

WEBP_ACCEPT = "image/avif,image/webp,image/apng,image/*,*/*;q=0.8"


def _ready(alice, size=(3000, 2000)) -> str:
    attachment_id = upload(client_for(alice), jpeg_bytes(size), filename="beach.jpg")
    assert run_pipeline(attachment_id) == "ready"
    return attachment_id


def _make(alice, attachment_id, name="small", accept=WEBP_ACCEPT) -> None:
    got = client_for(alice).get(f"/api/v1/attachments/{attachment_id}/variants/{name}", HTTP_ACCEPT=accept)
    assert got.status_code == 200, got.content


def _page(client, pk) -> str:
    response = client.get(f"/admin/attachments/attachment/{pk}/change/")
    assert response.status_code == 200
    return response.content.decode()


def _box(html: str) -> str:
    found = re.search(r'<div class="module airlock-variants" id="airlock-variants">(.*?)</div>', html, re.S)
    assert found, "no variants box"
    return found.group(1)


def _variants(alice_id) -> int:
    return Derivative.objects.filter(attachment_id=alice_id, kind__startswith="variant:").count()


def test_the_change_page_lists_the_variants_that_exist(browser_for, moderator, alice):
    attachment_id = _ready(alice)
    assert "None made yet." in _box(_page(browser_for(moderator), attachment_id))
    _make(alice, attachment_id, "small")
    _make(alice, attachment_id, "medium", accept="image/jpeg")
    box = _box(_page(browser_for(moderator), attachment_id))
    rows = re.findall(
        r'<tr data-variant="([^"]+)"><td>(\w+)</td><td>(\w+)</td><td>([^<]+)</td>\s*'
        r"<td>([^<]+)</td><td>([^<]+)</td></tr>",
        box,
    )
    assert [(r[0], r[1], r[2], r[4]) for r in rows] == [
        ("small:webp", "small", "webp", "640 × 427"),
        ("medium:jpeg", "medium", "jpeg", "1280 × 853"),
    ]
    assert all(re.fullmatch(r"[\d.]+\xa0(bytes|KB|MB)", r[3]) for r in rows), rows
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", r[5]) for r in rows), rows
    assert "2 variants" in box and 'id="airlock-purge-variants"' in box
    # The generic derivatives table no longer repeats them.
    html = _page(browser_for(moderator), attachment_id)
    assert "variant:small:webp" not in html


def test_purging_from_the_change_page_is_confirmed_and_audited(
    browser_for, moderator, alice, django_capture_on_commit_callbacks
):
    attachment_id = _ready(alice)
    _make(alice, attachment_id)
    key = Derivative.objects.get(attachment_id=attachment_id, kind="variant:small:webp").storage_key
    client = browser_for(moderator)
    url = f"/admin/attachments/attachment/{attachment_id}/moderate/purge_variants/"
    confirm = client.get(url)
    assert confirm.status_code == 200 and b"Purge variants: are you sure?" in confirm.content
    assert _variants(attachment_id) == 1
    with django_capture_on_commit_callbacks(execute=True):
        done = client.post(url, {"post": "yes"})
    assert done.status_code == 302
    assert _variants(attachment_id) == 0 and get_gateway().head(key) is None
    entry = TransitionLog.objects.get(attachment_id=attachment_id, transition="variants_purged")
    assert entry.actor == "staff:mod" and entry.details["variants"] == 1
    assert LogEntry.objects.filter(object_id=attachment_id, change_message__contains="Purge variants").exists()
    assert Attachment.objects.get(pk=attachment_id).status == "ready"


def test_staff_without_the_moderate_permission_see_variants_but_cannot_purge(browser_for, viewer, alice):
    attachment_id = _ready(alice)
    _make(alice, attachment_id)
    box = _box(_page(browser_for(viewer), attachment_id))
    assert "small" in box and "airlock-purge-variants" not in box
    refused = browser_for(viewer).post(
        f"/admin/attachments/attachment/{attachment_id}/moderate/purge_variants/", {"post": "yes"}
    )
    assert refused.status_code == 403 and _variants(attachment_id) == 1


def test_purging_a_selection_from_the_list(browser_for, moderator, alice):
    first, second = _ready(alice, (900, 600)), _ready(alice, (700, 500))
    _make(alice, first)
    _make(alice, second)
    done = browser_for(moderator).post(
        "/admin/attachments/attachment/",
        {"action": "moderate_purge_variants", "_selected_action": [first, second], "post": "yes"},
    )
    assert done.status_code == 302
    assert _variants(first) == _variants(second) == 0
    assert TransitionLog.objects.filter(transition="variants_purged").count() == 2


def test_a_profile_without_variants_has_no_box(browser_for, moderator, alice):
    attachment_id = upload(
        client_for(alice), pdf_bytes(), profile="document", filename="a.pdf", content_type="application/pdf"
    )
    run_pipeline(attachment_id)
    assert 'id="airlock-variants"' not in _page(browser_for(moderator), attachment_id)


def test_the_preview_offers_the_variants_in_srcset(browser_for, moderator, alice):
    attachment_id = _ready(alice)
    client = browser_for(moderator)
    img = re.search(r'<img class="airlock-thumb"[^>]*>', _page(client, attachment_id)).group(0)
    srcset = re.search(r'srcset="([^"]+)"', img).group(1)
    base = f"/admin/attachments/attachment/{attachment_id}"
    assert srcset.split(", ") == [
        f"{base}/thumbnail/ 256w",
        f"{base}/variant/small/ 640w",
        f"{base}/variant/medium/ 1280w",
        f"{base}/variant/large/ 2048w",
    ]
    assert 'sizes="256px"' in img and f'src="{base}/thumbnail/"' in img
    got = client.get(f"{base}/variant/medium/", HTTP_ACCEPT=WEBP_ACCEPT)
    assert got.status_code == 200 and got["Content-Type"] == "image/webp" and "Accept" in got["Vary"]
    assert _variants(attachment_id) == 1  # made on first request, like the API's
    assert client.get(f"{base}/variant/huge/").status_code == 404

    # Taken down: the thumbnail alone (staff see what they restore), no variant is served or made.
    attachment_take_down(attachment_id=attachment_id, actor="staff:mod", note="abuse")
    img = re.search(r'<img class="airlock-thumb"[^>]*>', _page(client, attachment_id)).group(0)
    assert "srcset" not in img
    assert client.get(f"{base}/variant/medium/", HTTP_ACCEPT=WEBP_ACCEPT).status_code == 404
    assert _variants(attachment_id) == 0


def test_a_small_image_offers_only_the_widths_it_has(browser_for, moderator, alice):
    attachment_id = _ready(alice, (320, 240))
    img = re.search(r'<img class="airlock-thumb"[^>]*>', _page(browser_for(moderator), attachment_id)).group(0)
    base = f"/admin/attachments/attachment/{attachment_id}"
    assert re.search(r'srcset="([^"]+)"', img).group(1) == f"{base}/thumbnail/ 256w, {base}/variant/small/ 320w"
