"""The upload page as a person uses it: pick files, watch them, retry, remove, commit."""

import pytest
from playwright.sync_api import expect

from attachments.models import Attachment
from tests.browser.conftest import open_upload_page
from tests.support import jpeg_bytes, png_bytes

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HOSTILE = '"><img src=x onerror=alert(1)>.jpg'


def _item(page, filename):
    return page.locator("#items li.item").filter(has=page.locator(".name", has_text=filename))


def test_upload_page_flow(page, live_server, live_worker, alice):
    # Signing in: / sends a visitor to the login page and back.
    page.goto("/")
    assert "/admin/login/" in page.url and "next=/" in page.url
    page.fill("#id_username", "alice")
    page.fill("#id_password", "pw-alice")
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    expect(page.locator(".who")).to_contain_text("alice")
    page.goto("/?heartbeat=1")

    # The profile list comes from GET /api/v1/profiles.
    expect(page.locator("#profile")).to_be_enabled()
    options = page.locator("#profile option").all_inner_texts()
    assert {"image", "document", "archive", "avatar", "media"} <= set(options)
    page.select_option("#profile", "image")
    assert "image/jpeg" in page.get_attribute("#files", "accept")

    # The first upload of second.png loses its connection mid-way.
    doomed: list[str] = []
    intents: list[dict] = []

    def on_intent(route):
        response = route.fetch()
        body = response.json()
        intents.append({"filename": route.request.post_data_json["filename"], "id": body.get("id"),
                        "csrf": route.request.headers.get("x-csrftoken")})
        if route.request.post_data_json["filename"] == "second.png" and not doomed:
            doomed.append(body["id"])
        route.fulfill(response=response)

    def on_content(route):
        if doomed and doomed[0] in route.request.url and not getattr(on_content, "fired", False):
            on_content.fired = True
            route.abort("connectionreset")
        else:
            route.continue_()

    page.route("**/api/v1/uploads", on_intent)
    page.route("**/api/v1/uploads/*/content?*", on_content)

    page.set_input_files("#files", [
        {"name": "first.jpg", "mimeType": "image/jpeg", "buffer": jpeg_bytes((800, 600))},
        {"name": "second.png", "mimeType": "image/png", "buffer": png_bytes((300, 200))},
        {"name": HOSTILE, "mimeType": "image/jpeg", "buffer": b"this is not a picture, whatever it says" * 3},
    ])

    first, second, hostile = _item(page, "first.jpg"), _item(page, "second.png"), _item(page, HOSTILE)
    expect(first).to_have_attribute("data-status", "ready", timeout=60_000)
    expect(hostile).to_have_attribute("data-status", "rejected", timeout=60_000)
    expect(hostile.locator(".reason")).to_contain_text("type_not_allowed")
    expect(second).to_have_attribute("data-status", "error")
    expect(second.locator(".reason")).to_contain_text("network error")
    assert all(i["csrf"] for i in intents), "API POSTs carry X-CSRFToken"

    # The thumbnail is fetched with the session and shown as a blob: URL.
    thumb = first.locator(".thumb img")
    expect(thumb).to_be_visible()
    assert page.evaluate(
        "el => el.src.startsWith('blob:')", thumb.element_handle()), "thumbnail comes from a blob URL"
    page.wait_for_function("el => el.naturalWidth > 0", arg=thumb.element_handle())

    # The hostile filename is text, not markup: no injected <img>, no alert.
    expect(hostile.locator(".name")).to_have_text(HOSTILE)
    assert page.locator("img[src=x]").count() == 0

    # Retry only the failed one: a new intent for that file.
    expect(second.locator("button.retry")).to_be_visible()
    expect(first.locator("button.retry")).to_be_hidden()
    second.locator("button.retry").click()
    expect(second).to_have_attribute("data-status", "ready", timeout=60_000)
    retried_id = second.get_attribute("data-id")
    assert retried_id != doomed[0]
    assert [i["filename"] for i in intents].count("second.png") == 2

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
    expect(second).to_have_attribute("data-status", "committed")
    assert page.dialogs == []

    rows = {str(a.pk): a for a in Attachment.objects.filter(owner=alice)}
    first_id = first.get_attribute("data-id")
    assert (rows[first_id].lifecycle, rows[first_id].ref) == ("committed", "listing:42")
    assert (rows[retried_id].lifecycle, rows[retried_id].ref) == ("committed", "listing:42")
    assert rows[hostile_id].lifecycle == "discarded"
    assert rows[doomed[0]].lifecycle == "discarded"  # the failed attempt was cleaned up by the retry
    assert rows[first_id].expires_at is None


def test_the_page_follows_all_its_files_with_one_waiting_request(page, live_server, live_worker, alice, settings):
    # A cap of 2 waiters for the user: one waiting request per file would meet it at the third file.
    settings.AIRLOCK_WAITERS_PER_USER = 2
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
    page.set_input_files("#files", [{"name": name, "mimeType": "image/png", "buffer": png_bytes((60 + n, 40))}
                                    for n, name in enumerate(names)])
    for name in names:
        expect(_item(page, name)).to_have_attribute("data-status", "ready", timeout=90_000)
    assert waits["per_file"] == 0, "a waiting request for a single file"
    assert waits["most"] == 1, waits
    assert waits["answers"] and all(answer == (200, None) for answer in waits["answers"]), waits["answers"]
