"""A page on another origin uploads straight to Airlock with a client token, never seeing the service token.

The test plays the host: it mints a client token with its service token (over
HTTP, as a host's backend would) and hands the page only that. The page
(127.0.0.1 on its own port; the API is the live server on localhost) creates
the intent with `Authorization: Bearer act_…`, PUTs the bytes to the plan's
URL and follows the status with the long-poll until the file is ready.
"""

from __future__ import annotations

import base64

import httpx
import pytest

from attachments.models import Attachment
from config.settings.cors import cors_settings
from tests.support import jpeg_bytes

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

UPLOAD = """async ({api, token, bytes}) => {
  const auth = {"Authorization": "Bearer " + token};
  const data = Uint8Array.from(atob(bytes), (c) => c.charCodeAt(0));
  const made = await fetch(api + "/api/v1/uploads", {method: "POST",
      headers: {...auth, "Content-Type": "application/json"},
      body: JSON.stringify({profile: "image", filename: "cat.jpg", size: data.length, content_type: "image/jpeg"})});
  const intent = await made.json();
  if (made.status !== 201) return {intent: made.status, body: intent};
  const put = await fetch(intent.upload.url, {method: "PUT", headers: intent.upload.headers, body: data});
  let resource = null;
  for (let i = 0; i < 6 && (!resource || !["ready", "rejected", "failed"].includes(resource.status)); i++) {
    const got = await fetch(api + "/api/v1/attachments/" + intent.id + "?wait=10", {headers: auth});
    resource = await got.json();
  }
  const usage = await fetch(api + "/api/v1/usage", {headers: auth});
  return {intent: made.status, id: intent.id, subject: intent.subject, put: put.status,
          status: resource.status, usage: usage.status, usageCode: (await usage.json()).error.code};
}"""


def test_a_page_on_another_origin_uploads_with_a_client_token(
    app_page, app_origin, live_server, live_worker, alice, settings
):
    for name, value in cors_settings([app_origin], allow_credentials=False).items():
        setattr(settings, name, value)
    assert live_server.url.split(":")[:2] != app_origin.split(":")[:2]  # cross-origin
    seen: list[tuple[str, dict[str, str]]] = []
    app_page.on("request", lambda r: seen.append((r.url, r.all_headers())))

    minted = httpx.post(
        f"{live_server.url}/api/v1/client-tokens",
        json={"subject": "guest-7", "ttl_seconds": 300, "profiles": ["image"], "max_files": 3},
        headers={"Authorization": f"Token {alice.api_token}"},
    )
    assert minted.status_code == 201, minted.text
    token = minted.json()["token"]

    out = app_page.evaluate(
        UPLOAD, {"api": live_server.url, "token": token, "bytes": base64.b64encode(jpeg_bytes()).decode()}
    )

    assert out["intent"] == 201 and out["put"] == 202, out
    assert out["status"] == "ready" and out["subject"] == "guest-7"
    assert (out["usage"], out["usageCode"]) == (403, "CLIENT_TOKEN_SCOPE")  # outside the grant
    row = Attachment.objects.get(pk=out["id"])
    assert (row.owner_id, row.subject, row.status) == (alice.pk, "guest-7", "ready")
    # The page only ever held the client token: not the service token in its requests, nor in its JS context.
    api_calls = [headers for url, headers in seen if url.startswith(live_server.url + "/api/v1/attachments")]
    assert api_calls and all(h.get("authorization") == f"Bearer {token}" for h in api_calls)
    assert all(alice.api_token not in url and alice.api_token not in str(headers) for url, headers in seen)
    found = app_page.evaluate(
        "t => document.documentElement.outerHTML.includes(t) || JSON.stringify(Object.keys(window)).includes(t)",
        alice.api_token,
    )
    assert found is False
