"""The upload page as a person uses it: pick files in Uppy's Dashboard, watch them, retry, remove, commit.

On local storage (these tests) the bytes go through Uppy's Tus plugin; the S3 modes are in
test_upload_page_s3.py.
"""

import pytest
from playwright.sync_api import expect

from attachments.models import Attachment, TusUpload
from tests.browser.conftest import DASHBOARD_INPUT, choose_profile, open_upload_page, pick_files, upload_item, watch_csp
from tests.corpus import corpus_dir
from tests.support import jpeg_bytes, png_bytes

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HOSTILE = '"><img src=x onerror=alert(1)>.jpg'
MIB = 1024 * 1024


def test_upload_page_flow(page, live_server, live_worker, alice):
    violations = watch_csp(page)
    # Signing in: / sends a visitor to the login page and back.
    page.goto("/")
    assert "/admin/login/" in page.url and "next=/" in page.url
    page.fill("#id_username", "alice")
    page.fill("#id_password", "pw-alice")
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    expect(page.locator(".who")).to_contain_text("alice")
    page.goto("/?heartbeat=1")

    # The profile list comes from GET /api/v1/profiles; by default each file goes to the one for its type.
    expect(page.locator("#profile")).to_be_enabled()
    options = page.locator("#profile option").all_inner_texts()
    assert {"by file type", "image", "document", "archive", "avatar", "media"} <= set(options)
    assert page.input_value("#profile") == "auto"
    accept = page.get_attribute(DASHBOARD_INPUT, "accept")
    assert "image/jpeg" in accept and "video/mp4" in accept and "application/pdf" in accept

    # second.png's connection is gone for a while: every PATCH of its upload drops, until tus gives up.
    csrf: list[str | None] = []
    second = {"url": None, "blocked": True, "dropped": 0}

    def network(route):
        request = route.request
        if request.method == "POST":
            csrf.append(request.headers.get("x-csrftoken"))
            response = route.fetch()
            if "c2Vjb25kLnBuZw" in (request.headers.get("upload-metadata") or ""):  # base64("second.png")
                second["url"] = response.headers["location"]
            route.fulfill(response=response)
        elif request.method == "PATCH" and second["blocked"] and second["url"] and request.url == second["url"]:
            second["dropped"] += 1
            route.abort("connectionreset")
        else:
            route.continue_()

    page.route(lambda url: "/api/v1/tus/" in url, network)

    pick_files(
        page,
        [
            {"name": "first.jpg", "mimeType": "image/jpeg", "buffer": jpeg_bytes((800, 600))},
            {"name": "second.png", "mimeType": "image/png", "buffer": png_bytes((300, 200))},
            {"name": HOSTILE, "mimeType": "image/jpeg", "buffer": b"this is not a picture, whatever it says" * 3},
        ],
    )

    first, second_item, hostile = (
        upload_item(page, "first.jpg"),
        upload_item(page, "second.png"),
        upload_item(page, HOSTILE),
    )
    expect(first).to_have_attribute("data-via", "tus")
    expect(first).to_have_attribute("data-status", "ready", timeout=60_000)
    expect(hostile).to_have_attribute("data-status", "rejected", timeout=60_000)
    expect(hostile.locator(".reason")).to_contain_text("type_not_allowed")
    # tus tried again from the server's offset (a HEAD each time) before reporting the error.
    expect(second_item).to_have_attribute("data-status", "error", timeout=60_000)
    expect(second_item.locator(".reason")).to_contain_text("network error")
    assert second["dropped"] > 1 and int(second_item.get_attribute("data-resumes")) >= 1
    assert csrf and all(csrf), "API POSTs carry X-CSRFToken"

    # The thumbnail is its signed link (no header needed), with the variants in its srcset: each
    # with the width it has (an 800 × 600 photo's medium and large are both 800 wide: one candidate).
    thumb = first.locator(".thumb img")
    expect(thumb).to_be_visible()
    assert "/thumbnail?" in thumb.get_attribute("src") and "sig=" in thumb.get_attribute("src")
    candidates = [c.rsplit(" ", 1) for c in thumb.get_attribute("srcset").split(", ")]
    assert [w for _, w in candidates] == ["256w", "640w", "800w"]
    assert "/variants/small?" in candidates[1][0] and "/variants/medium?" in candidates[2][0]
    assert thumb.get_attribute("sizes") == "72px"
    page.wait_for_function("el => el.naturalWidth > 0", arg=thumb.element_handle())

    # The hostile filename is text, not markup: no injected <img>, no alert.
    expect(hostile.locator(".name")).to_have_text(HOSTILE)
    assert page.locator("img[src=x]").count() == 0

    # Retry is offered where it can succeed: the dropped upload, not the content decision.
    expect(second_item.locator("button.retry")).to_be_visible()
    expect(first.locator("button.retry")).to_be_hidden()
    expect(hostile.locator("button.retry")).to_be_hidden()
    failed_id = second_item.get_attribute("data-id")
    second["blocked"] = False  # the network is back
    second_item.locator("button.retry").click()
    expect(second_item).to_have_attribute("data-status", "ready", timeout=60_000)
    # tus carried on with the same upload (no second intent).
    assert second_item.get_attribute("data-id") == failed_id
    assert TusUpload.objects.filter(attachment__owner=alice).count() == 3

    # The heartbeat runs while the page is open (every second with ?heartbeat=1).
    expect(page.locator("#heartbeat")).to_contain_text("kept", timeout=10_000)

    # Remove the rejected one: discarded on the server, gone from the page.
    hostile_id = hostile.get_attribute("data-id")
    hostile.locator("button.remove").click()
    expect(hostile).to_have_count(0)

    # Commit the rest to a ref with one button.
    expect(page.locator("#commit")).to_have_text("Commit 2 files")
    page.fill("#ref", "listing:42")
    page.click("#commit")
    expect(page.locator("#commit-result")).to_have_text("Committed 2 to listing:42.")
    expect(first).to_have_attribute("data-status", "committed")
    expect(second_item).to_have_attribute("data-status", "committed")
    assert page.dialogs == []

    rows = {str(a.pk): a for a in Attachment.objects.filter(owner=alice)}
    first_id = first.get_attribute("data-id")
    assert (rows[first_id].lifecycle, rows[first_id].ref) == ("committed", "listing:42")
    assert (rows[failed_id].lifecycle, rows[failed_id].ref) == ("committed", "listing:42")
    assert rows[hostile_id].lifecycle == "discarded"
    assert rows[first_id].expires_at is None
    assert violations == [], violations


def test_a_refused_claim_is_shown_without_retry(page, live_server, alice):
    """Too large for the chosen profile: the server refuses the claim; sending it again cannot help."""
    open_upload_page(page, live_server, "alice", "avatar")  # 5 MiB at most
    pick_files(page, [{"name": "big.png", "mimeType": "image/png", "buffer": png_bytes((64, 64)) + b"\0" * (6 * MIB)}])
    item = upload_item(page, "big.png")
    expect(item).to_have_attribute("data-status", "error", timeout=30_000)
    expect(item.locator(".reason")).to_contain_text("TOO_LARGE")
    expect(item.locator("button.retry")).to_be_hidden()
    assert not Attachment.objects.filter(owner=alice).exists()


def test_each_file_gets_the_profile_for_its_type(page, live_server, live_worker, alice):
    """A photo and a phone video picked together: image for one, media for the other (issue #32)."""
    open_upload_page(page, live_server, "alice")
    video = (corpus_dir() / "generated" / "video_rotated.mov").read_bytes()
    pick_files(
        page,
        [
            {"name": "photo.jpg", "mimeType": "image/jpeg", "buffer": jpeg_bytes((320, 240))},
            {"name": "IMG_0003.MOV", "mimeType": "video/quicktime", "buffer": video},
        ],
    )
    photo, clip = upload_item(page, "photo.jpg"), upload_item(page, "IMG_0003.MOV")
    expect(photo).to_have_attribute("data-status", "ready", timeout=60_000)
    expect(clip).to_have_attribute("data-status", "ready", timeout=60_000)
    expect(photo.locator(".meta").first).to_contain_text("image")
    expect(clip.locator(".meta").first).to_contain_text("media")
    assert Attachment.objects.get(pk=photo.get_attribute("data-id")).profile == "image"
    assert Attachment.objects.get(pk=clip.get_attribute("data-id")).profile == "media"

    # A profile chosen by hand applies to what is picked next, and the picker only offers its types
    # (and the extension naming them, for a file the browser gives no type).
    choose_profile(page, "document")
    allowed = page.evaluate("window.airlock.uppy().opts.restrictions.allowedFileTypes")
    assert allowed == ["application/pdf", ".pdf"]


def test_the_dashboard_speaks_the_browsers_language(chromium, live_server, alice):
    context = chromium.new_context(base_url=live_server.url, locale="de-DE")
    try:
        page = context.new_page()
        open_upload_page(page, live_server, "alice")
        expect(page.locator("html")).to_have_attribute("data-uppy-locale", "de_DE")
        expect(page.locator("#dashboard")).to_contain_text("Dateien hier ablegen")
    finally:
        context.close()
    context = chromium.new_context(base_url=live_server.url, locale="en-US")
    try:
        page = context.new_page()
        open_upload_page(page, live_server, "alice")
        expect(page.locator("#dashboard")).to_contain_text("Drop files here")
        assert page.get_attribute("html", "data-uppy-locale") is None
    finally:
        context.close()


def test_the_page_follows_all_its_files_with_one_waiting_request(page, live_server, live_worker, alice, settings):
    # A cap of 2 waiters for the user: one waiting request per file would meet it at the third file.
    settings.AIRLOCK_HTTP_LIMITS = settings.AIRLOCK_HTTP_LIMITS.replace(waiters_per_user=2)
    waits = {"open": 0, "most": 0, "per_file": 0, "answers": []}

    def opened(request):
        if "wait=" in request.url:
            waits["open"] += 1
            waits["most"] = max(waits["most"], waits["open"])
            waits["per_file"] += "/attachments?" not in request.url

    def closed(request):
        if "wait=" in request.url:
            waits["open"] -= 1

    def answered(response):
        if "wait=" in response.url:
            waits["answers"].append((response.status, response.headers.get("airlock-wait")))

    page.on("request", opened)
    page.on("requestfinished", closed)
    page.on("requestfailed", closed)
    page.on("response", answered)
    open_upload_page(page, live_server, "alice", "image")
    names = [f"photo-{n:02d}.png" for n in range(12)]
    pick_files(
        page,
        [{"name": name, "mimeType": "image/png", "buffer": png_bytes((60 + n, 40))} for n, name in enumerate(names)],
    )
    for name in names:
        expect(upload_item(page, name)).to_have_attribute("data-status", "ready", timeout=90_000)
    assert waits["per_file"] == 0, "a waiting request for a single file"
    assert waits["most"] == 1, waits
    assert waits["answers"] and all(answer == (200, None) for answer in waits["answers"]), waits["answers"]
