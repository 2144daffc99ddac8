"""The upload page with a client token: a host's person uploads with no Airlock account and no session."""

import pytest
import requests
from playwright.sync_api import expect

from attachments.models import Attachment
from tests.browser.conftest import choose_profile, pick_files, upload_item, watch_csp
from tests.support import png_bytes

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _mint(live_server, service, **grant) -> str:
    response = requests.post(
        f"{live_server.url}/api/v1/client-tokens",
        json={"subject": "guest-7", "ttl_seconds": 600, **grant},
        headers={"Authorization": f"Token {service.api_token}"},
        timeout=10,
    )
    assert response.status_code == 201, response.text
    return response.json()["token"]


def test_a_client_token_uploads_for_its_subject_without_a_session(page, live_server, live_worker, alice):
    violations = watch_csp(page)
    token = _mint(live_server, alice, ref="album:1")
    sent: list[tuple[str, dict]] = []
    page.on(
        "request", lambda request: sent.append((request.url, request.headers)) if "/api/v1/" in request.url else None
    )

    page.goto(f"/upload#token={token}")
    # The token leaves the address bar (no bookmark, screenshot or history entry keeps it).
    page.wait_for_function("() => window.location.hash === ''")
    assert page.url == f"{live_server.url}/upload"
    expect(page.locator(".who")).to_have_count(0)  # nobody is signed in
    choose_profile(page, "image")
    pick_files(page, {"name": "guest.png", "mimeType": "image/png", "buffer": png_bytes((64, 48))})
    item = upload_item(page, "guest.png")
    expect(item).to_have_attribute("data-status", "ready", timeout=60_000)

    # The file is the subject's, held by the host's account that minted the token.
    row = Attachment.objects.get(filename="guest.png")
    assert (row.subject, row.owner_id, row.status) == ("guest-7", alice.pk, "ready")
    # Every API call carried the client token (signed links carry their own signature), none a session,
    # and the service token never reached the page.
    calls = [(url, headers) for url, headers in sent if "sig=" not in url]
    assert calls and all(h.get("authorization") == f"Bearer {token}" for _, h in calls), [
        u for u, h in calls if h.get("authorization") != f"Bearer {token}"
    ]
    assert not page.context.cookies()
    assert alice.api_token not in page.content()
    assert alice.api_token not in page.evaluate("() => JSON.stringify(window.sessionStorage)")

    # The granted ref takes the commit; the page says so.
    page.fill("#ref", "album:1")
    page.click("#commit")
    expect(item).to_have_attribute("data-status", "committed", timeout=30_000)
    row.refresh_from_db()
    assert (row.lifecycle, row.ref) == ("committed", "album:1")
    assert violations == []


def test_without_a_token_the_page_says_it_cannot_upload(page, live_server):
    page.goto("/upload")
    # The profile list needs a credential: the page shows the API's refusal instead of a picker that fails later.
    expect(page.locator("#page-error")).to_be_visible(timeout=30_000)
