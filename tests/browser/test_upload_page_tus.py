"""On local storage the upload page sends files through Uppy's Tus plugin: progress, one PATCH lost to a
dropped connection and resumed from the server's offset, and a reload mid-upload that Golden Retriever
resumes (the same tus upload, from where the server stands)."""

import hashlib
import re

import pytest
from playwright.sync_api import expect

from attachments.models import Attachment, TransitionLog, TusUpload
from tests.browser.conftest import open_upload_page, pick_files, upload_item, watch_csp
from tests.s3.support import mp4_bytes


def _assembled_digest(storage_root, attachment) -> str:
    """The digest of what tus assembled: the original itself, or, once a video's location-free copy became its
    one stored copy, the digest the original's removal recorded (whichever the rendition job left)."""
    try:
        return hashlib.sha256((storage_root / attachment.storage_key).read_bytes()).hexdigest()
    except FileNotFoundError:
        removed = TransitionLog.objects.get(attachment_id=attachment.pk, transition="original_removed")
        return removed.details["sha256"]


pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MIB = 1024 * 1024


def tus_urls(url: str) -> bool:
    return "/api/v1/tus/" in url


def test_a_30_mb_file_goes_up_through_tus_and_resumes_after_the_network_drops(
    page, live_server, live_worker, alice, storage_root, tmp_path
):
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

    page.route(tus_urls, cut_the_third_patch)

    data = mp4_bytes(30 * MIB)
    path = tmp_path / "clip.mp4"  # a path, not a buffer: 30 MB through the driver's pipe is slow on a busy machine
    path.write_bytes(data)
    pick_files(page, str(path), timeout=120_000)
    item = upload_item(page, "clip.mp4")
    expect(item).to_have_attribute("data-via", "tus")
    expect(item).to_have_attribute("data-status", "ready", timeout=120_000)

    assert dropped == [str(10 * MIB)]  # the third 5 MiB chunk
    assert item.get_attribute("data-resumes") == "1"
    # Created once; after the cut the client asked the server where it stood (HEAD), then carried on.
    assert seen[0] == "POST" and seen.count("POST") == 1
    after_cut = seen[seen.index("PATCH") + 3 :]
    assert after_cut[0] == "HEAD" and "PATCH" in after_cut
    assert seen.count("PATCH") == 6 + 1  # 30 MiB in 5 MiB chunks, one of them twice

    attachment = Attachment.objects.get(pk=item.get_attribute("data-id"))
    assert attachment.owner == alice and attachment.status == "ready"
    assert attachment.size == len(data) and attachment.content_type == "video/mp4"
    assert _assembled_digest(storage_root, attachment) == hashlib.sha256(data).hexdigest()
    assert TusUpload.objects.get(pk=attachment.pk).state == "complete"
    assert not (storage_root / ".tus" / str(attachment.pk)).exists()
    assert item.locator(".status").text_content() == "ready"


def test_a_reload_mid_upload_resumes_it(page, live_server, live_worker, alice, tmp_path):
    violations = watch_csp(page)
    open_upload_page(page, live_server, "alice")

    seen: list[tuple[str, str]] = []
    held: list = []

    def network(route):
        request = route.request
        seen.append((request.method, request.headers.get("upload-offset", "")))
        if request.method == "PATCH" and any(method == "PATCH" for method, _ in seen[:-1]):
            held.append(route)  # the second chunk never gets an answer: the upload hangs mid-way
            return
        route.continue_()

    page.route(tus_urls, network)
    path = tmp_path / "clip.mp4"
    data = mp4_bytes(12 * MIB)
    path.write_bytes(data)
    pick_files(page, str(path))
    item = upload_item(page, "clip.mp4")
    expect(item).to_have_attribute("data-id", re.compile(".+"), timeout=30_000)
    upload_id = item.get_attribute("data-id")
    for _ in range(300):
        if held:
            break
        page.wait_for_timeout(100)
    assert held, "the second chunk was sent"
    assert TusUpload.objects.get(pk=upload_id).offset == 5 * MIB

    # The user reloads the page in the middle of the upload; Golden Retriever brings it back.
    # (The new handler takes precedence; the held chunk stays unanswered until the reload cancels it.)
    seen_after: list[tuple[str, str]] = []
    page.route(
        tus_urls,
        lambda route: (
            seen_after.append((route.request.method, route.request.headers.get("upload-offset", ""))),
            route.continue_(),
        ),
    )
    page.reload()
    item = upload_item(page, "clip.mp4")
    expect(item).to_have_attribute("data-status", "ready", timeout=90_000)
    assert item.get_attribute("data-id") == upload_id
    assert seen_after[0][0] == "HEAD" and not any(
        method == "POST" for method, _ in seen_after
    )  # resumed, not created anew
    assert [offset for method, offset in seen_after if method == "PATCH"][0] == str(5 * MIB)
    assert TusUpload.objects.count() == 1
    attachment = Attachment.objects.get(pk=upload_id)
    assert attachment.size == len(data) and attachment.status == "ready"
    assert violations == [], violations
