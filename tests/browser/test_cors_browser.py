"""A browser app on another origin calls the API and tus with fetch() (Chromium enforces CORS).

The app's page is served from 127.0.0.1 on its own port; the API is the live
server (localhost, another port): a different origin, so every call with
`Authorization` or a tus header is preflighted. With the app's origin in
AIRLOCK_CORS_ALLOWED_ORIGINS it creates an intent, reads its status headers,
creates a tus upload and PATCHes a chunk; without it the browser refuses.
"""

from __future__ import annotations

import pytest

from attachments.models import Attachment, TusUpload
from config.settings.cors import cors_settings

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Runs in the app's page: every call the way a browser client makes it.
SCRIPT = """async ({api, token}) => {
  const auth = {"Authorization": "Token " + token};
  const out = {};
  const intent = await fetch(api + "/api/v1/uploads", {method: "POST",
      headers: {...auth, "Content-Type": "application/json", "X-Request-ID": "from-the-app"},
      body: JSON.stringify({profile: "image", filename: "cat.jpg", size: 100, content_type: "image/jpeg"})});
  out.intent = {status: intent.status, id: (await intent.json()).id};
  const status = await fetch(api + "/api/v1/attachments/" + out.intent.id + "?wait=5", {headers: auth});
  out.status = {status: status.status, wait: status.headers.get("Airlock-Wait"),
                requestId: status.headers.get("X-Request-ID"), body: (await status.json()).status};
  const meta = "profile " + btoa("image") + ",filename " + btoa("cat.jpg") + ",content_type " + btoa("image/jpeg");
  const created = await fetch(api + "/api/v1/tus/", {method: "POST",
      headers: {...auth, "Tus-Resumable": "1.0.0", "Upload-Length": "10", "Upload-Metadata": meta}});
  out.tusCreate = {status: created.status, location: created.headers.get("Location"),
                   expires: created.headers.get("Upload-Expires")};
  const patched = await fetch(out.tusCreate.location, {method: "PATCH",
      headers: {...auth, "Tus-Resumable": "1.0.0", "Upload-Offset": "0",
                "Content-Type": "application/offset+octet-stream"},
      body: new Uint8Array([48, 49, 50, 51, 52])});
  out.tusPatch = {status: patched.status, offset: patched.headers.get("Upload-Offset"),
                  resumable: patched.headers.get("Tus-Resumable")};
  const head = await fetch(out.tusCreate.location, {method: "HEAD", headers: {...auth, "Tus-Resumable": "1.0.0"}});
  out.tusHead = {status: head.status, offset: head.headers.get("Upload-Offset"),
                 length: head.headers.get("Upload-Length")};
  return out;
}"""

# The first call alone: without CORS the browser refuses it (a TypeError, no status to read).
REFUSED = """async ({api, token}) => {
  try {
    const r = await fetch(api + "/api/v1/uploads", {method: "POST",
        headers: {"Authorization": "Token " + token, "Content-Type": "application/json"},
        body: JSON.stringify({profile: "image", filename: "cat.jpg", size: 100, content_type: "image/jpeg"})});
    return "answered " + r.status;
  } catch (e) { return "refused: " + e.name; }
}"""


def _allow(settings, origins: list[str]) -> None:
    for name, value in cors_settings(origins, allow_credentials=False).items():
        setattr(settings, name, value)


def test_an_allowed_origin_creates_reads_and_patches_tus(app_page, app_origin, live_server, alice, settings):
    _allow(settings, [app_origin])
    # the wait is skipped: Airlock-Wait is there to read
    settings.AIRLOCK_HTTP_LIMITS = settings.AIRLOCK_HTTP_LIMITS.replace(waiters_per_user=0)
    assert live_server.url.split(":")[:2] != app_origin.split(":")[:2]  # another host (and port): cross-origin

    out = app_page.evaluate(SCRIPT, {"api": live_server.url, "token": alice.api_token})

    assert out["intent"]["status"] == 201
    assert out["status"] == {
        "status": 200,
        "wait": "skipped; reason=user-limit; limit=0",
        "requestId": out["status"]["requestId"],
        "body": "pending",
    }
    assert out["status"]["requestId"]  # an exposed header, read by the script
    assert out["tusCreate"]["status"] == 201 and out["tusCreate"]["expires"]
    assert out["tusCreate"]["location"].startswith(live_server.url + "/api/v1/tus/")
    assert out["tusPatch"] == {"status": 204, "offset": "5", "resumable": "1.0.0"}
    assert out["tusHead"] == {"status": 200, "offset": "5", "length": "10"}
    tus_id = out["tusCreate"]["location"].rsplit("/", 1)[1]
    assert Attachment.objects.get(pk=out["intent"]["id"]).owner == alice
    assert TusUpload.objects.get(pk=tus_id).offset == 5


def test_without_the_cors_setting_the_browser_refuses(app_page, live_server, alice):
    result = app_page.evaluate(REFUSED, {"api": live_server.url, "token": alice.api_token})
    assert result == "refused: TypeError"
    assert not Attachment.objects.exists()  # the preflight failed: the POST was never sent


def test_another_origin_than_the_listed_one_is_refused(app_page, live_server, alice, settings):
    _allow(settings, ["https://app.example.com"])
    result = app_page.evaluate(REFUSED, {"api": live_server.url, "token": alice.api_token})
    assert result == "refused: TypeError"
    assert not Attachment.objects.exists()
