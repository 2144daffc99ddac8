"""A busy service (429, 503 with Retry-After) on a guest's link page: the page waits as asked and sends again."""

from __future__ import annotations

import base64
import json
import time
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from attachments.links.services.upload_links import upload_link_create
from attachments.models import Attachment, Lifecycle
from tests.support import png_bytes

from .conftest import pick_files, upload_item

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def phone(chromium, live_server):
    context = chromium.new_context(
        base_url=live_server.url, viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True
    )
    context.set_default_timeout(30_000)
    yield context.new_page()
    context.close()


def filename_of(request) -> str:
    for pair in (request.headers.get("upload-metadata") or "").split(","):
        key, _, value = pair.strip().partition(" ")
        if key == "filename":
            return base64.b64decode(value).decode()
    return ""


def busy_once(phone, status: int, retry_after: int, times: int = 1) -> dict[str, list[float]]:
    """Answer each file's first `times` tus creates with `status` + Retry-After; the creates' times by file name."""
    creates: dict[str, list[float]] = {}

    def handle(route) -> None:
        request = route.request
        if request.method != "POST":
            route.continue_()
            return
        name = filename_of(request)
        creates.setdefault(name, []).append(time.monotonic())
        if len(creates[name]) <= times:
            code = "RATE_LIMITED" if status == 429 else "UNAVAILABLE"
            route.fulfill(
                status=status,
                headers={"Retry-After": str(retry_after), "Content-Type": "application/json", "Tus-Resumable": "1.0.0"},
                body=json.dumps({"error": {"code": code, "message": "busy"}}),
            )
        else:
            route.continue_()

    phone.route("**/api/v1/tus/", handle)
    return creates


def open_link(phone, alice):
    link = upload_link_create(user=alice, ref="event:busy", expires_at=timezone.now() + timedelta(days=1))
    phone.goto(f"/l/{link.pk}")
    expect(phone.locator("h1")).to_be_visible()
    return link


@pytest.mark.parametrize("status", [429, 503])
def test_a_busy_answer_is_sent_again_after_its_retry_after(phone, live_worker, alice, tmp_path, status):
    link = open_link(phone, alice)
    creates = busy_once(phone, status, retry_after=3)
    photo = tmp_path / "cake.png"
    photo.write_bytes(png_bytes((50, 30)))
    pick_files(phone, [str(photo)])
    item = upload_item(phone, "cake.png")
    expect(item).to_have_attribute("data-status", "ready", timeout=60_000)
    expect(item.locator(".status")).to_have_text("Received")
    first, second = creates["cake.png"][:2]
    # Uppy's own pause would be retryDelays' next value (0 s): the page waits what the server asked.
    assert second - first >= 2.5
    assert Attachment.objects.get(upload_link=link).lifecycle == Lifecycle.COMMITTED


def test_a_seventh_busy_answer_on_one_page_is_waited_out_too(phone, live_worker, alice, tmp_path):
    """Uppy's own 429 pauses take turns from one page-wide list of five delays, never refilled: on a page
    where a guest sends one photo after another through a busy evening, the sixth 429 ended an upload."""
    link = open_link(phone, alice)
    creates = busy_once(phone, 429, retry_after=1)
    for i in range(7):
        path = tmp_path / f"photo-{i}.png"
        path.write_bytes(png_bytes((40 + i, 30)))
        if i:  # the Dashboard lists what was sent; its picker is behind "Add more"
            phone.locator(".uppy-DashboardContent-addMore").click()
        pick_files(phone, [str(path)])
        item = upload_item(phone, f"photo-{i}.png")
        expect(item).to_have_attribute("data-status", "ready", timeout=60_000)
    assert [len(creates[f"photo-{i}.png"]) for i in range(7)] == [2] * 7
    assert Attachment.objects.filter(upload_link=link, lifecycle=Lifecycle.COMMITTED).count() == 7


def test_a_service_shedding_a_burst_is_waited_out_past_five_tries(phone, live_worker, alice, tmp_path):
    """A backlog shed answers 503 with Retry-After until the queue drains: five tries were not enough."""
    link = open_link(phone, alice)
    creates = busy_once(phone, 503, retry_after=1, times=7)
    photo = tmp_path / "dance.png"
    photo.write_bytes(png_bytes((52, 30)))
    pick_files(phone, [str(photo)])
    item = upload_item(phone, "dance.png")
    expect(item).to_have_attribute("data-status", "ready", timeout=120_000)
    assert len(creates["dance.png"]) == 8
    assert Attachment.objects.get(upload_link=link).lifecycle == Lifecycle.COMMITTED
