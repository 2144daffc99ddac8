"""The wedding example (examples/wedding) beside a real `manage.py serve`, walked in Chromium.

Seed 002's flow from the host's side: a couple creates an event (the host makes
an Airlock upload link for `event:<id>` that requires approval) and shows its QR
code; a guest on a phone, with no cookie and no account, opens the link's URL
(Airlock's own page, nothing of the host's in between) and sends a photo and two
short videos; the couple sees them waiting, approves the photo and one video and
declines the other; the gallery shows the photo and plays the video from signed
links, the declined video is gone, and "Download the album" gives a ZIP of what
was approved. Airlock's signed webhooks reach the host; a forged one does not.

Depends on the upload-links API and its guest page (#43 items 1-2, branch
wip/links): `POST /api/v1/upload-links`, the link's page at its `url`, the
`approval` list filter and `POST /api/v1/attachments/approve|decline`.

Runs in both modes, as test_marketplace.py does: Airlock's database, broker and
scanners are whatever the environment selects; storage is local, and S3 (moto over
HTTP) too, where the guest's page sends the bytes to the bucket and the gallery's
signed links redirect to presigned GETs. The example keeps its own SQLite database.
"""

from __future__ import annotations

import base64
import re
import sqlite3
import time
import zipfile

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import DASHBOARD_INPUT, watch_csp
from tests.examples.host_apps import Example, HostStack, bucket_cors, forged_webhook_statuses, host_page, sqlite_uuid
from tests.support import jpeg_bytes
from tests.support.processes import REPO

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SECRET = "whsec_" + base64.b64encode(b"wedding-example-test-secret-32b!").decode()
WAIT = 180_000  # ms: uploads, their processing (videos in the sandbox) and the webhooks, on a loaded machine
VIDEO = (REPO / "tests/corpus/files/generated/video_faststart.mp4").read_bytes()
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True, "device_scale_factor": 3}


class Stack(HostStack):
    def guest_files(self) -> dict[str, tuple[str, str]]:
        """The host's own records, from the webhooks: attachment id → (status, approval)."""
        with sqlite3.connect(self.data_dir / "wedding.sqlite3") as db:
            rows = db.execute("SELECT attachment_id, status, approval FROM album_guestfile").fetchall()
        return {sqlite_uuid(row[0]): (row[1], row[2]) for row in rows}


WEDDING = Example("wedding", "runwedding", Stack, SECRET, origin_flag="--media-origin", bucket="wedding")


@pytest.fixture(scope="module")
def example() -> Example:
    """The `stack` (local storage: the guest's page sends the bytes to Airlock itself) and the `s3_stack` (moto
    over HTTP: the guest's page sends the bytes to the bucket) run the wedding album."""
    return WEDDING


def guest_uploads(chromium, airlock: str, url: str, files: list[dict]) -> None:
    """A guest's phone: a fresh context (no cookie), the link's page, the files picked; each ends received."""
    context = chromium.new_context(**PHONE)
    context.set_default_timeout(60_000)
    assert context.cookies() == []
    try:
        page = context.new_page()
        violations = watch_csp(page)
        page.goto(url)
        assert page.url.startswith(airlock + "/")  # Airlock's own page: nothing of the host's in between
        page.set_input_files(DASHBOARD_INPUT, files)
        for file in files:
            item = page.locator("#items li.item").filter(has=page.locator(".name", has_text=file["name"]))
            expect(item).to_have_attribute("data-status", "ready", timeout=WAIT)
            expect(item.locator(".status").first).to_have_text("Received")
        assert violations == []
    finally:
        context.close()


def pending_items(page, event_url: str, count: int) -> dict[str, str]:
    """Reload the couple's event page until `count` files wait for approval, all checked: filename → id."""
    deadline = time.monotonic() + WAIT / 1000
    while True:
        page.goto(event_url)
        ready = page.locator("#pending li.pending[data-status=ready]")
        if ready.count() >= count or time.monotonic() > deadline:
            break
        time.sleep(1)
    expect(ready).to_have_count(count)
    return {li.locator(".name").inner_text(): li.get_attribute("data-id") for li in ready.all()}


@pytest.mark.parametrize("storage", ["local", pytest.param("s3", marks=pytest.mark.s3)])
def test_guests_upload_by_qr_the_couple_approves_and_the_gallery_shows_and_zips_it(
    chromium, request, storage, tmp_path
):
    stack = request.getfixturevalue("stack" if storage == "local" else "s3_stack")
    if storage == "s3":  # Airlock's page uploads to the bucket, the host's pages read from it
        bucket_cors(stack, [stack.server.base, stack.host])
    page = host_page(chromium, stack, accept_downloads=True)
    couple = page.context
    violations = watch_csp(page)

    # The couple creates the event: the host made an upload link for event:<id> that requires approval.
    page.goto("/")
    page.fill("#title", "Anna & Ben")
    page.click("#create")
    page.wait_for_url(re.compile(r"/events/\d+$"))
    event_url = page.url
    event_id = event_url.rsplit("/", 1)[1]
    ref = f"event:{event_id}"
    expect(page.locator("h1")).to_have_text("Anna & Ben")
    qr = page.locator("#qr")
    page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=qr.element_handle())
    link_url = page.locator("#link-url").get_attribute("href") or ""
    assert link_url.startswith(stack.server.base + "/")
    with stack.airlock() as airlock:
        links = [link for link in airlock.iter_upload_links() if link["ref"] == ref]
        assert (
            len(links) == 1
            and links[0]["requires_approval"] is True
            and links[0]["url"].endswith(link_url.rsplit("/", 1)[1])
        )
    # The QR code the host shows is Airlock's, for that URL.
    svg = httpx.get(f"{event_url}/qr.svg", cookies=dict((c["name"], c["value"]) for c in couple.cookies())).text
    assert svg.lstrip().startswith(("<?xml", "<svg")) and "<path" in svg
    page.click("#print")
    expect(page.locator("#card h1")).to_have_text("Anna & Ben")
    page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=page.locator("#qr").element_handle())

    # A guest on a phone: a photo and two short videos through Airlock's page.
    guest_uploads(
        chromium,
        stack.server.base,
        link_url,
        [
            {"name": "dance.jpg", "mimeType": "image/jpeg", "buffer": jpeg_bytes((800, 600), color=(200, 60, 120))},
            {"name": "vows.mp4", "mimeType": "video/mp4", "buffer": VIDEO},
            {"name": "blooper.mp4", "mimeType": "video/mp4", "buffer": VIDEO},
        ],
    )

    # The couple sees them waiting (nothing in the gallery yet), thumbnails and posters included.
    waiting = pending_items(page, event_url, 3)
    assert set(waiting) == {"dance.jpg", "vows.mp4", "blooper.mp4"}
    for thumb in page.locator("#pending img.thumb").all():
        page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=thumb.element_handle())
    with stack.airlock() as airlock:
        for attachment_id in waiting.values():
            resource = airlock.get(attachment_id)
            assert resource["approval"] == "pending" and resource["committed"] is False
        assert list(airlock.iter_attachments(ref=ref)) == []  # not the ref's until approved
    gallery_url = page.locator("#gallery-link").get_attribute("href")
    # Airlock's signed webhooks told the host too: the home page's badge counts them.
    stack.wait_log(*(f"webhook attachment.ready: {i} of {ref} is ready (approval pending)" for i in waiting.values()))
    page.goto("/")
    expect(page.locator("#events .badge")).to_have_text("3 waiting for you")
    page.goto(event_url)

    # Approve the photo and one video, decline the other video.
    page.check(f"#pending input[value='{waiting['dance.jpg']}']")
    page.check(f"#pending input[value='{waiting['vows.mp4']}']")
    page.click("#approve")
    expect(page.locator("#done")).to_have_text("2 approved.")
    page.check(f"#pending input[value='{waiting['blooper.mp4']}']")
    page.click("#decline")
    expect(page.locator("#done")).to_have_text("1 declined.")
    expect(page.locator("#nothing-pending")).to_be_visible()

    with stack.airlock() as airlock:
        for name in ("dance.jpg", "vows.mp4"):
            resource = airlock.get(waiting[name])
            assert resource["approval"] == "approved" and resource["committed"] and resource["ref"] == ref
        declined = airlock.get(waiting["blooper.mp4"])
        assert declined["approval"] == "declined" and declined["lifecycle"] == "discarded"
        assert not declined["available"] and "download" not in declined["links"]
    # Airlock's signed webhooks told the host.
    stack.wait_log(
        f"webhook attachment.approved: {waiting['dance.jpg']} of {ref}",
        f"webhook attachment.approved: {waiting['vows.mp4']} of {ref}",
        f"webhook attachment.declined: {waiting['blooper.mp4']} of {ref}",
    )

    # The gallery (anyone with its address: a fresh context) shows the photo and plays the approved video.
    gallery = host_page(chromium, stack, accept_downloads=True)
    gallery_violations = watch_csp(gallery)
    gallery.goto(gallery_url)
    photos = gallery.locator("#gallery li[data-kind=photo] img.thumb")
    expect(photos).to_have_count(1)
    src = photos.first.get_attribute("src") or ""
    assert src.startswith(f"{stack.server.base}/api/v1/attachments/{waiting['dance.jpg']}/thumbnail?exp=")
    gallery.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=photos.first.element_handle())
    videos = gallery.locator("#gallery li[data-kind=video] video")
    expect(videos).to_have_count(1)
    assert waiting["vows.mp4"] in (videos.first.get_attribute("src") or "")
    gallery.wait_for_function("v => v.readyState >= 1 && v.videoWidth > 0", arg=videos.first.element_handle())
    assert gallery.locator(f"[data-id='{waiting['blooper.mp4']}']").count() == 0  # the declined video is gone

    # Download the album: a ZIP of what was approved, streamed by Airlock from a fresh signed link.
    with gallery.expect_download() as download_info:
        gallery.click("#album")
    path = tmp_path / "album.zip"
    download_info.value.save_as(path)
    with zipfile.ZipFile(path) as album:
        names = album.namelist()
        assert sorted(names) == ["dance.jpg", "vows.mp4"]
        assert album.read("dance.jpg")[:3] == b"\xff\xd8\xff"
        assert album.testzip() is None
    assert violations == [] and gallery_violations == []
    gallery.context.close()
    couple.close()


def test_the_webhook_endpoint_refuses_what_airlock_did_not_sign(stack):
    """A forged `attachment.approved` changes nothing: 400, and the host records nothing of it."""
    before = stack.guest_files()
    event = {
        "type": "attachment.approved",
        "timestamp": "2030-01-01T00:00:00Z",
        "data": {"id": "00000000-0000-4000-8000-000000000001", "ref": "event:1", "approval": "approved"},
    }
    assert forged_webhook_statuses(stack, event) == (400, 400)
    assert stack.guest_files() == before
