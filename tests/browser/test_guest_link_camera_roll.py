"""A guest with no cookie opens an upload link on a phone (390 x 844) and on a desktop (1280 px): sends a HEIC
photo the browser types as nothing and a short video, sees both received, removes the photo."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from attachments.links.services.upload_links import upload_link_create
from attachments.models import Attachment, Lifecycle
from tests.browser.test_upload_page_camera import GENERATED, pick_typeless
from tests.support import client_for

from .conftest import upload_item

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"viewport": {"width": 390, "height": 844}, "device_scale_factor": 3, "is_mobile": True, "has_touch": True}
DESKTOP = {"viewport": {"width": 1280, "height": 900}}


@pytest.fixture(params=[PHONE, DESKTOP], ids=["phone-390", "desktop-1280"])
def guest(request, chromium, live_server):
    context = chromium.new_context(base_url=live_server.url, **request.param)
    context.set_default_timeout(30_000)
    page = context.new_page()
    page.width = request.param["viewport"]["width"]
    server_errors: list[str] = []
    page.on("response", lambda r: server_errors.append(f"{r.status} {r.url}") if r.status >= 500 else None)
    page.server_errors = server_errors
    yield page
    context.close()


def test_a_guest_sends_a_typeless_heic_and_a_video_sees_them_received_and_takes_one_back(guest, live_worker, alice):
    link = upload_link_create(
        user=alice, ref="wedding:1", title="Anna & Ben", expires_at=timezone.now() + timedelta(days=1)
    )
    assert guest.context.cookies() == []
    guest.goto(f"/l/{link.pk}")
    expect(guest.locator("h1")).to_have_text("Anna & Ben")
    files = [("IMG_0001.HEIC", "heic_gps_rotated.heic"), ("IMG_0002.MOV", "video_rotated.mov")]
    pick_typeless(guest, [(name, (GENERATED / src).read_bytes()) for name, src in files])

    photo, video = (upload_item(guest, name) for name, _ in files)
    for item in (photo, video):
        expect(item).to_have_attribute("data-status", "ready", timeout=90_000)
        expect(item.locator(".status")).to_have_text("Received")
        # Nothing of the service's internals: no profile, no type, no reason code.
        assert not item.locator(".reason").is_visible() and not item.locator(".advice").is_visible()
        assert "camera" not in item.inner_text() and "image/" not in item.inner_text()
    expect(video.locator(".line .meta")).to_contain_text("0:0")  # its length, as a phone shows it
    expect(photo.locator(".thumb img")).to_be_visible()
    assert guest.evaluate("document.documentElement.scrollWidth") <= guest.width

    rows = {row.filename: row for row in Attachment.objects.filter(upload_link=link)}
    assert {name: (row.lifecycle, row.ref) for name, row in rows.items()} == {
        name: (Lifecycle.COMMITTED, "wedding:1") for name, _ in files
    }
    assert rows["IMG_0001.HEIC"].declared_type == "image/heic"  # Uppy names it from its table; the bytes decide
    host = client_for(alice)
    listed = {a["filename"]: a for a in host.get("/api/v1/attachments?ref=wedding:1").json()["results"]}
    assert sorted(listed) == ["IMG_0001.HEIC", "IMG_0002.MOV"]
    assert all(a["available"] for a in listed.values())
    download = listed["IMG_0001.HEIC"]["links"]["download"]
    assert host.get(download).status_code == 200

    photo.locator("button.remove").click()
    expect(photo).to_have_count(0)
    expect(video).to_have_attribute("data-status", "ready")
    removed = rows["IMG_0001.HEIC"]
    removed.refresh_from_db()
    assert removed.lifecycle == Lifecycle.RELEASED
    # Gone for the host: no longer available, not served (listed as released only within its grace).
    listed = {a["filename"]: a for a in host.get("/api/v1/attachments?ref=wedding:1").json()["results"]}
    assert [name for name, a in listed.items() if a["available"]] == ["IMG_0002.MOV"]
    assert "download" not in listed["IMG_0001.HEIC"]["links"]
    assert host.get(download).status_code == 404
    assert guest.server_errors == []
