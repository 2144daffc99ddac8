"""The upload page on a phone (390 x 844) with the camera profile: photos and a video the browser types
as nothing end ready, each processed as what its bytes are."""

import base64

import pytest
from playwright.sync_api import expect

from attachments.models import Attachment
from tests.browser.conftest import DASHBOARD_INPUT, open_upload_page, upload_item
from tests.corpus import corpus_dir

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

GENERATED = corpus_dir() / "generated"


def pick_typeless(page, files: list[tuple[str, bytes]]) -> None:
    """Give the Dashboard's picker Files whose type is "", as Chromium gives a .HEIC from a phone."""
    # The page's script mounts the Dashboard after the server-rendered heading shows: on a loaded
    # machine the picker can be missing for a moment, so wait for it as a person waits to see it.
    page.locator(DASHBOARD_INPUT).wait_for(state="attached")
    page.evaluate(
        """(files) => {
            const input = document.querySelector("#dashboard input.uppy-Dashboard-input");
            const picked = new DataTransfer();
            for (const [name, b64] of files) {
                const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
                picked.items.add(new File([bytes], name, { type: "" }));
            }
            input.files = picked.files;
            input.dispatchEvent(new Event("change", { bubbles: true }));
        }""",
        [[name, base64.b64encode(data).decode()] for name, data in files],
    )


def test_a_phone_sends_a_typeless_camera_roll_to_camera(page, live_server, live_worker, alice):
    page.set_viewport_size({"width": 390, "height": 844})
    open_upload_page(page, live_server, "alice", profile="camera")
    restriction = page.evaluate("window.airlock.uppy().opts.restrictions.allowedFileTypes")
    assert {"image/heic", "video/quicktime", ".hif", ".heic", ".mov"} <= set(restriction)
    expect(page.locator("#profile-hint")).to_contain_text("photo up to 25.0 MB, video up to 1024.0 MB")

    # Chromium gives none of these a type (Playwright would name one from the extension, so the
    # files are handed to the picker as a browser's File with type ""). Uppy's own table names
    # HEIC and MOV; it has no HIF (a camera's HEIF), which it calls application/octet-stream:
    # the page takes that one by its extension, and Airlock by its bytes.
    files = [
        ("IMG_0001.HEIC", "heic_gps_rotated.heic"),
        ("IMG_0002.HIF", "heic_gps_rotated.heic"),
        ("IMG_0003.MOV", "video_rotated.mov"),
    ]
    pick_typeless(page, [(name, (GENERATED / src).read_bytes()) for name, src in files])
    for name, _ in files:
        item = upload_item(page, name)
        expect(item).to_have_attribute("data-status", "ready", timeout=90_000)
        expect(item.locator(".meta").first).to_contain_text("camera")
    rows = {row.filename: row for row in Attachment.objects.all()}
    assert set(rows) == {name for name, _ in files}
    assert {name: row.profile for name, row in rows.items()} == dict.fromkeys(rows, "camera")
    assert rows["IMG_0001.HEIC"].content_type == "image/jpeg"  # served full resolution as a JPEG
    assert {name: row.declared_type for name, row in rows.items()} == {
        "IMG_0001.HEIC": "image/heic",  # Uppy's table
        "IMG_0002.HIF": "application/octet-stream",
        "IMG_0003.MOV": "video/quicktime",
    }
    assert rows["IMG_0003.MOV"].content_type == "video/quicktime"
    kinds = {name: set(row.derivatives.values_list("kind", flat=True)) for name, row in rows.items()}
    assert {"thumbnail", "display"} <= kinds["IMG_0001.HEIC"] and "poster" not in kinds["IMG_0001.HEIC"]
    assert {"thumbnail", "poster"} <= kinds["IMG_0003.MOV"] and "display" not in kinds["IMG_0003.MOV"]
    # Nothing on the page is wider than the phone.
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
