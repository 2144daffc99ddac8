"""The marketplace example (examples/marketplace) beside a real `manage.py serve`, walked in Chromium.

Seed 001's ad draft from the host's side: photos upload first from the browser
(by plans the host asks Airlock for), thumbnails appear when Airlock's signed
webhook reaches the host, "Post ad" commits them to `ad:<id>`, and a draft left
open and then abandoned stops heartbeating, expires and is removed by the
sweeper, which the host learns by webhook too.

Runs in both modes: Airlock's database, broker and scanners are whatever the
environment selects (`scripts/test`: PostgreSQL, Redis, clamd; `--embedded`:
SQLite, in-process broker, YARA), as tests/e2e does. Storage is local (the
browser sends the signed PUT to Airlock itself), and for the post flow S3 too
(moto over HTTP: the browser posts the presigned form to the bucket). The
example keeps its own SQLite database either way.
"""

from __future__ import annotations

import base64
import json
import re
import sqlite3
import subprocess
import sys
import time

import pytest
from playwright.sync_api import expect

from airlock_client import NotFound
from tests.browser.conftest import watch_csp
from tests.examples.host_apps import Example, HostStack, bucket_cors, forged_webhook_statuses, host_page, sqlite_uuid
from tests.support import jpeg_bytes
from tests.support.processes import REPO

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SECRET = "whsec_" + base64.b64encode(b"marketplace-example-test-secret!").decode()
# Staged files live TTL seconds unless heartbeaten: the abandoned draft expires within the test.
TTL = 20
HEARTBEAT = 2  # the draft page beats this often, well inside TTL
WAIT = 60_000  # ms: an upload, its processing and the webhook, on a loaded machine


class Stack(HostStack):
    def host_photos(self) -> dict[str, tuple[str, bool]]:
        """The host's own records: attachment id → (status, committed)."""
        with sqlite3.connect(self.data_dir / "marketplace.sqlite3") as db:
            rows = db.execute("SELECT attachment_id, status, committed FROM ads_photo").fetchall()
        return {sqlite_uuid(row[0]): (row[1], bool(row[2])) for row in rows}


MARKETPLACE = Example(
    "marketplace",
    "runmarketplace",
    Stack,
    SECRET,
    origin_flag="--upload-origin",
    bucket="market",
    airlock_env=lambda market: {
        "AIRLOCK_CORS_ALLOWED_ORIGINS": market,
        "AIRLOCK_LIFECYCLE_SECONDS": {"staged_ttl": TTL, "heartbeat_window": TTL},
        "AIRLOCK_SWEEP": {"interval_seconds": 86400},  # the test runs the sweeper command itself
    },
    host_env={"MARKETPLACE_HEARTBEAT_SECONDS": str(HEARTBEAT)},
)


@pytest.fixture(scope="module")
def example() -> Example:
    """The `stack` (local storage: the browser sends the signed PUT to Airlock itself) and the `s3_stack` (moto
    over HTTP: the browser posts the presigned form to the bucket) run the marketplace."""
    return MARKETPLACE


@pytest.fixture
def page(chromium, stack):
    page = host_page(chromium, stack)
    yield page
    page.context.close()


def photo(name: str, color: tuple[int, int, int]) -> dict:
    return {"name": name, "mimeType": "image/jpeg", "buffer": jpeg_bytes((640, 480), color=color)}


def new_draft(page) -> str:
    page.goto("/")
    page.click("#new-ad")
    page.wait_for_url("**/edit")
    return page.url


@pytest.mark.parametrize("storage", ["local", pytest.param("s3", marks=pytest.mark.s3)])
def test_post_an_ad_with_photos_uploaded_first_and_thumbnails_from_the_webhook(chromium, request, storage):
    stack = request.getfixturevalue("stack" if storage == "local" else "s3_stack")
    if storage == "s3":  # what `manage.py s3_setup --apply` gives the bucket for the marketplace's origin
        bucket_cors(stack, [stack.host])
    page = host_page(chromium, stack)
    violations = watch_csp(page)
    sent: list[tuple[str, str]] = []  # the bytes' requests, wherever they went
    page.on("requestfinished", lambda r: sent.append((r.method, r.url)) if r.method in ("PUT", "POST") else None)
    requests: list[tuple[str, str, dict[str, str]]] = []  # every request the page made, with its headers
    page.on("request", lambda r: requests.append((r.method, r.url, r.all_headers())))
    new_draft(page)
    page.set_input_files(
        "#picker",
        [
            photo("front.jpg", (200, 40, 40)),
            photo("back.jpg", (40, 200, 40)),
            {"name": "broken.jpg", "mimeType": "image/jpeg", "buffer": b"\xff\xd8\xff\xe0 not a photo at all " * 20},
        ],
    )
    photos = page.locator("#photos li.photo")
    ready = page.locator("#photos li[data-status=ready] img.thumb")
    expect(ready).to_have_count(2, timeout=WAIT)
    expect(page.locator("#photos li[data-status=rejected]")).to_have_count(1, timeout=WAIT)
    ids = {li.get_attribute("data-status"): li.get_attribute("data-id") for li in photos.all()}
    good = [li.get_attribute("data-id") for li in photos.all() if li.get_attribute("data-status") == "ready"]
    rejected = ids["rejected"]
    for attachment_id in good:  # Airlock's signed link, loaded cross-origin with no header
        thumbnail = page.locator(f"#photos li[data-id='{attachment_id}'] img.thumb")
        src = thumbnail.get_attribute("src") or ""
        assert src.startswith(f"{stack.server.base}/api/v1/attachments/{attachment_id}/thumbnail?exp=")
        assert "&sig=" in src
        page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=thumbnail.element_handle())

    # The host learnt every outcome from a signed webhook (it never asks Airlock for a status).
    log = stack.log_path.read_text()
    for attachment_id in good:
        assert f"webhook attachment.ready: photo {attachment_id} is ready" in log
    assert f"webhook attachment.rejected: photo {rejected} is rejected" in log

    # The bytes went where Airlock's plans said, from the browser, with no API token.
    if storage == "s3":
        bucket = stack.server.env["AIRLOCK_S3_ENDPOINT_URL"]
        assert len([u for m, u in sent if m == "POST" and u.startswith(bucket)]) == 3
    else:
        assert (
            len([u for m, u in sent if m == "PUT" and u.startswith(stack.server.base) and "/content?token=" in u]) == 3
        )

    # The browser created the intents itself, with the client token the host minted for this seller.
    intents = [h for m, u, h in requests if m == "POST" and u == f"{stack.server.base}/api/v1/uploads"]
    assert len(intents) == 3 and all(h["authorization"].startswith("Bearer act_") for h in intents)
    with stack.airlock() as airlock:
        subjects = {airlock.get(i)["subject"] for i in (*good, rejected)}
    assert len(subjects) == 1 and next(iter(subjects)) != "marketplace"  # the seller, not the host's account
    # The service token never reached the page: not in its HTML, its script's view, nor any request.
    assert stack.token not in page.content()
    assert not page.evaluate("t => document.documentElement.outerHTML.includes(t)", stack.token)
    assert all(stack.token not in u and stack.token not in json.dumps(h) for _, u, h in requests)

    page.fill("#title", "Red bicycle")
    page.click("#post")
    page.wait_for_url(re.compile(r"/ads/\d+$"))
    ad_id = page.url.rstrip("/").rsplit("/", 1)[1]
    expect(page.locator("h1")).to_have_text("Red bicycle")
    gallery = page.locator("#gallery img.thumb")
    expect(gallery).to_have_count(2, timeout=WAIT)
    for thumbnail in gallery.all():
        page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=thumbnail.element_handle())

    # Airlock holds the two photos for ad:<id>; the rejected one was left out.
    with stack.airlock() as airlock:
        for attachment_id in good:
            resource = airlock.get(attachment_id)
            assert resource["committed"] and resource["ref"] == f"ad:{ad_id}" and resource["expires_at"] is None
        assert airlock.get(rejected)["committed"] is False
    records = stack.host_photos()
    assert all(records[i] == ("ready", True) for i in good)
    # The committed event reached the host too (its own commit already said so: idempotent).
    stack.wait_log(*[f"webhook attachment.committed: photo {i} is committed to ad:{ad_id}" for i in good], timeout=30)
    assert violations == []
    page.context.close()


def test_cancel_discards_the_drafts_photos(page, stack):
    new_draft(page)
    page.set_input_files("#picker", [photo("sofa.jpg", (90, 90, 200))])
    expect(page.locator("#photos li[data-status=ready] img.thumb")).to_have_count(1, timeout=WAIT)
    attachment_id = page.locator("#photos li.photo").first.get_attribute("data-id")
    page.click("#cancel")
    page.wait_for_url(f"{stack.host}/")
    assert stack.host_photos()[attachment_id] == ("discarded", False)
    with stack.airlock() as airlock:
        resource = airlock.get(attachment_id)  # discarded: no longer served, swept on the next run
    assert resource["lifecycle"] == "discarded" and "thumbnail" not in resource["links"]


def test_an_abandoned_draft_stops_heartbeating_and_the_sweeper_removes_its_photos(page, stack):
    new_draft(page)
    page.set_input_files("#picker", [photo("lamp.jpg", (220, 200, 60))])
    expect(page.locator("#photos li[data-status=ready] img.thumb")).to_have_count(1, timeout=WAIT)
    attachment_id = page.locator("#photos li.photo").first.get_attribute("data-id")
    with stack.airlock() as airlock:
        first = airlock.get(attachment_id)["expires_at"]
        # While the page is open its heartbeats push the expiry on.
        deadline = time.monotonic() + 4 * HEARTBEAT + 5
        while airlock.get(attachment_id)["expires_at"] == first and time.monotonic() < deadline:
            time.sleep(0.5)
        assert airlock.get(attachment_id)["expires_at"] > first
        page.close()  # the seller walks away: no Post, no Cancel, no more heartbeats
        last = airlock.get(attachment_id)["expires_at"]
        time.sleep(1.5 * HEARTBEAT)
        assert airlock.get(attachment_id)["expires_at"] == last

        due = time.time() + TTL + 1
        while time.time() < due:  # until the staged file is due (the last beat + TTL)
            time.sleep(1)
        report = json.loads(
            subprocess.run(
                [sys.executable, "manage.py", "sweep", "--json"],
                cwd=REPO,
                env=stack.server.env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        assert report["deleted"] >= 1 and report["errors"] == 0
        with pytest.raises(NotFound):
            airlock.get(attachment_id)
    # Airlock's attachment.deleted webhook tells the host.
    deadline = time.monotonic() + 60
    while stack.host_photos()[attachment_id][0] != "deleted" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert stack.host_photos()[attachment_id] == ("deleted", False)


def test_the_webhook_endpoint_refuses_what_airlock_did_not_sign(stack):
    """A forged `attachment.ready` for a photo the host knows changes nothing: 400, the record stays."""
    known = next(iter(stack.host_photos().items()), None)
    assert known is not None, "runs after the flows above, which leave photos behind"
    attachment_id, before = known
    event = {
        "type": "attachment.rejected",
        "timestamp": "2030-01-01T00:00:00Z",
        "data": {"id": attachment_id, "status": "rejected", "reason": {"code": "malware"}},
    }
    assert forged_webhook_statuses(stack, event) == (400, 400)
    assert stack.host_photos()[attachment_id] == before
