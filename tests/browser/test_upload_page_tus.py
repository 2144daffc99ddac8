"""The upload page sends a large file through tus (the vendored tus-js-client): progress, one PATCH lost
to a dropped connection, the upload resumed from the server's offset, then processed like any upload."""

import re

import pytest
from playwright.sync_api import expect

from attachments.models import Attachment, TusUpload
from tests.browser.conftest import open_upload_page
from tests.s3.support import mp4_bytes

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MIB = 1024 * 1024


def test_a_30_mb_file_goes_up_through_tus_and_resumes_after_the_network_drops(page, live_server, live_worker,
                                                                              alice, storage_root, tmp_path):
    open_upload_page(page, live_server, "alice", "media")

    seen: list[str] = []
    dropped: list[str] = []

    def cut_the_third_patch(route):
        request = route.request
        seen.append(request.method)
        if request.method == "PATCH" and seen.count("PATCH") == 3 and not dropped:
            dropped.append(request.headers.get("upload-offset", ""))
            route.abort("connectionreset")  # the network drops: nothing of it reaches the server
        else:
            route.continue_()

    page.route(lambda url: "/api/v1/tus/" in url, cut_the_third_patch)

    data = mp4_bytes(30 * MIB)
    path = tmp_path / "clip.mp4"  # a path, not a buffer: 30 MB through the driver's pipe is slow on a busy machine
    path.write_bytes(data)
    page.set_input_files("#files", str(path), timeout=120_000)
    item = page.locator("#items li.item").filter(has=page.locator(".name", has_text="clip.mp4"))
    expect(item).to_have_attribute("data-via", "tus")
    expect(item).to_have_attribute("data-status", "ready", timeout=120_000)

    assert dropped == [str(10 * MIB)]  # the third 5 MiB chunk
    assert item.get_attribute("data-resumes") == "1"
    # Created once; after the cut the client asked the server where it stood (HEAD), then carried on.
    assert seen[0] == "POST" and seen.count("POST") == 1
    after_cut = seen[seen.index("PATCH") + 3:]
    assert after_cut[0] == "HEAD" and "PATCH" in after_cut
    assert seen.count("PATCH") == 6 + 1  # 30 MiB in 5 MiB chunks, one of them twice

    attachment = Attachment.objects.get(pk=item.get_attribute("data-id"))
    assert attachment.owner == alice and attachment.status == "ready"
    assert attachment.size == len(data) and attachment.content_type == "video/mp4"
    assert (storage_root / attachment.storage_key).read_bytes() == data
    assert TusUpload.objects.get(pk=attachment.pk).state == "complete"
    assert not (storage_root / ".tus" / str(attachment.pk)).exists()
    assert item.locator(".status").text_content() == "ready"


def test_small_files_still_take_the_intent_path(page, live_server, alice):
    open_upload_page(page, live_server, "alice", "media")
    page.set_input_files("#files", [{"name": "small.mp4", "mimeType": "video/mp4", "buffer": mp4_bytes(MIB)}])
    item = page.locator("#items li.item").filter(has=page.locator(".name", has_text="small.mp4"))
    expect(item).to_have_attribute("data-status", "pending", timeout=30_000)
    assert item.get_attribute("data-via") is None
    assert not TusUpload.objects.exists()


def test_picking_the_same_file_after_a_reload_resumes_the_upload(page, live_server, alice, tmp_path):
    def pick_media():
        expect(page.locator("#profile")).to_be_enabled()
        page.select_option("#profile", "media")

    open_upload_page(page, live_server, "alice", "media")

    seen: list[tuple[str, str]] = []
    cut = {"on": False}

    def network(route):
        request = route.request
        seen.append((request.method, request.headers.get("upload-offset", "")))
        if request.method == "PATCH" and cut["on"]:
            route.abort("connectionreset")
            return
        if request.method == "PATCH":
            cut["on"] = True  # the first chunk gets through; then the network is gone
        route.continue_()

    def tus_urls(url: str) -> bool:
        return "/api/v1/tus/" in url

    page.route(tus_urls, network)
    path = tmp_path / "clip.mp4"  # a file on disk: the same name, size and date when picked again
    data = mp4_bytes(12 * MIB)
    path.write_bytes(data)
    page.set_input_files("#files", str(path))
    item = page.locator("#items li.item").filter(has=page.locator(".name", has_text="clip.mp4"))
    # The page keeps retrying against the dead network; on a busy machine the count may
    # pass 1 between two looks, so any retry at all is the sign.
    expect(item).to_have_attribute("data-resumes", re.compile(r"^[1-9][0-9]*$"), timeout=30_000)
    upload_id = item.get_attribute("data-id")
    assert TusUpload.objects.get(pk=upload_id).offset == 5 * MIB

    page.reload()  # the user gives up on this page and comes back
    page.unroute(tus_urls, network)
    seen_after: list[tuple[str, str]] = []
    page.route(tus_urls,
               lambda route: (seen_after.append((route.request.method, route.request.headers.get("upload-offset", ""))),
                              route.continue_()))
    pick_media()
    page.set_input_files("#files", str(path))
    item = page.locator("#items li.item").filter(has=page.locator(".name", has_text="clip.mp4"))
    expect(item).to_have_attribute("data-status", "pending", timeout=60_000)
    assert item.get_attribute("data-id") == upload_id
    assert seen_after[0][0] == "HEAD" and ("POST", "") not in seen_after  # resumed, not created anew
    assert [offset for method, offset in seen_after if method == "PATCH"][0] == str(5 * MIB)
    assert TusUpload.objects.count() == 1
    attachment = Attachment.objects.get(pk=upload_id)
    assert attachment.uploaded_at is not None
