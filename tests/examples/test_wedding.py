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
import json
import re
import sqlite3
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import boto3
import httpx
import pytest
from playwright.sync_api import expect, sync_playwright

from airlock_client import Client
from tests.browser.conftest import DASHBOARD_INPUT, launch_chromium, watch_csp
from tests.examples.host_apps import host_app, sqlite_uuid
from tests.s3.support import moto_bucket_env
from tests.support import jpeg_bytes
from tests.support.processes import REPO, Server, free_port

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SECRET = "whsec_" + base64.b64encode(b"wedding-example-test-secret-32b!").decode()
WAIT = 180_000  # ms: uploads, their processing (videos in the sandbox) and the webhooks, on a loaded machine
VIDEO = (REPO / "tests/corpus/files/generated/video_faststart.mp4").read_bytes()
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True, "device_scale_factor": 3}


@dataclass
class Stack:
    server: Server
    token: str
    host: str
    data_dir: Path
    log_path: Path

    def airlock(self) -> Client:
        return Client(self.server.base, self.token)

    def guest_files(self) -> dict[str, tuple[str, str]]:
        """The host's own records, from the webhooks: attachment id → (status, approval)."""
        with sqlite3.connect(self.data_dir / "wedding.sqlite3") as db:
            rows = db.execute("SELECT attachment_id, status, approval FROM album_guestfile").fetchall()
        return {sqlite_uuid(row[0]): (row[1], row[2]) for row in rows}

    def wait_log(self, *lines: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not all(line in self.log_path.read_text() for line in lines) and time.monotonic() < deadline:
            time.sleep(0.3)
        missing = [line for line in lines if line not in self.log_path.read_text()]
        assert not missing, f"not in the host's log: {missing}"


def start_stack(tmp_path_factory, airlock_env: dict[str, str], media_origins: tuple[str, ...] = ()) -> Iterator[Stack]:
    port = free_port()
    host = f"http://127.0.0.1:{port}"
    server = Server(
        tmp_path_factory.mktemp("airlock"),
        {
            "AIRLOCK_WEBHOOK_URL": f"{host}/airlock/webhook",
            "AIRLOCK_WEBHOOK_SECRET": SECRET,
            "AIRLOCK_WEBHOOK_ALLOW_PRIVATE": "1",
            **airlock_env,
        },
    )
    data_dir = tmp_path_factory.mktemp("wedding")
    try:
        token = server.createuser("wedding", "wedding")
        env = {
            "WEDDING_DATA_DIR": str(data_dir),
            "WEDDING_AIRLOCK_TOKEN": token,
            "WEDDING_WEBHOOK_SECRET": SECRET,
        }
        with host_app(
            project="wedding",
            command="runwedding",
            server=server,
            port=port,
            data_dir=data_dir,
            env=env,
            origin_flag="--media-origin",
            origins=media_origins,
        ) as log_path:
            yield Stack(server, token, host, data_dir, log_path)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Iterator[Stack]:
    """Airlock on local storage: the guest's page sends the bytes to Airlock itself."""
    yield from start_stack(tmp_path_factory, {})


@pytest.fixture(scope="module")
def s3_stack(tmp_path_factory, moto_endpoint) -> Iterator[Stack]:
    """Airlock on S3 (moto over HTTP): the guest's page sends the bytes to the bucket."""
    stack_ = start_stack(tmp_path_factory, moto_bucket_env(moto_endpoint, "wedding"), media_origins=(moto_endpoint,))
    yield from stack_


@pytest.fixture(scope="module")
def chromium() -> Iterator:
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        yield browser
        browser.close()


def bucket_cors(stack: Stack) -> None:
    """What `manage.py s3_setup --apply` gives the bucket: Airlock's page uploads to it, the host's pages read."""
    boto3.client(
        "s3", endpoint_url=stack.server.env["AIRLOCK_S3_ENDPOINT_URL"], region_name="us-east-1"
    ).put_bucket_cors(
        Bucket=stack.server.env["AIRLOCK_S3_BUCKET"],
        CORSConfiguration={
            "CORSRules": [
                {
                    "AllowedOrigins": [stack.server.base, stack.host],
                    "AllowedMethods": ["GET", "HEAD", "POST", "PUT"],
                    "AllowedHeaders": ["*"],
                    "ExposeHeaders": ["ETag"],
                    "MaxAgeSeconds": 3600,
                }
            ]
        },
    )


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
    if storage == "s3":
        bucket_cors(stack)
    couple = chromium.new_context(base_url=stack.host, viewport={"width": 1280, "height": 900}, accept_downloads=True)
    couple.set_default_timeout(60_000)
    page = couple.new_page()
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
    viewer = chromium.new_context(base_url=stack.host, viewport={"width": 1280, "height": 900}, accept_downloads=True)
    viewer.set_default_timeout(60_000)
    gallery = viewer.new_page()
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
    viewer.close()
    couple.close()


def test_the_webhook_endpoint_refuses_what_airlock_did_not_sign(stack):
    """A forged `attachment.approved` changes nothing: 400, and the host records nothing of it."""
    before = stack.guest_files()
    body = json.dumps(
        {
            "type": "attachment.approved",
            "timestamp": "2030-01-01T00:00:00Z",
            "data": {"id": "00000000-0000-4000-8000-000000000001", "ref": "event:1", "approval": "approved"},
        }
    ).encode()
    headers = {
        "webhook-id": "msg_forged",
        "webhook-timestamp": str(int(time.time())),
        "webhook-signature": "v1," + base64.b64encode(b"\0" * 32).decode(),
        "content-type": "application/json",
    }
    assert httpx.post(f"{stack.host}/airlock/webhook", content=body, headers=headers).status_code == 400
    unsigned = httpx.post(f"{stack.host}/airlock/webhook", content=body, headers={"content-type": "application/json"})
    assert unsigned.status_code == 400
    assert stack.guest_files() == before
