"""The Python client's upload links, approval and album calls against `manage.py serve`.

A host makes a link, reads it back, lists it, fetches its QR codes and disables it;
a guest's file (sent with the link's own client token, as its page does) waits for
approval until the host approves it, and the ref's album link then serves a ZIP of it.
"""

from __future__ import annotations

import io
import re
import zipfile
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from airlock_client import AirlockError, Client
from tests.support import jpeg_bytes

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def live(serve_factory):
    return serve_factory({}, users=(("host", "acme"),))


def guest_token(link_url: str) -> str:
    """What the link's page gives a device that opens it: a client token for its guest subject."""
    page = httpx.get(link_url)
    assert page.status_code == 200
    found = re.search(r'name="airlock-guest-token" content="([^"]+)"', page.text)
    assert found, "the link's page carries the guest's client token"
    return found.group(1)


def test_a_link_is_made_read_listed_drawn_and_disabled(live):
    with live.client("host") as host:
        link = host.create_upload_link(
            "event:7", datetime.now(UTC) + timedelta(days=1), title="Anna & Ben", requires_approval=True
        )
        assert link["url"].startswith(live.server.base + "/l/") and link["requires_approval"] is True
        assert host.get_upload_link(link["id"])["ref"] == "event:7"
        assert link["id"] in {each["id"] for each in host.iter_upload_links()}
        svg = host.upload_link_qr(link)
        assert svg.lstrip().startswith((b"<?xml", b"<svg"))
        assert host.upload_link_qr(link, format="png")[:8] == b"\x89PNG\r\n\x1a\n"
        host.disable_upload_link(link["id"])
        assert host.get_upload_link(link["id"])["state"] == "disabled"
        assert httpx.get(link["url"]).status_code == 410
        with pytest.raises(ValueError):
            host.approve()
        with pytest.raises(ValueError):
            host.decline(["x"], ref="event:7")


def test_a_guests_file_waits_for_approval_then_the_album_holds_it(live, tmp_path):
    photo = tmp_path / "dance.jpg"
    photo.write_bytes(jpeg_bytes((320, 240)))
    with live.client("host") as host:
        link = host.create_upload_link("event:8", datetime.now(UTC) + timedelta(days=1), requires_approval=True)
        with Client(live.server.base, guest_token(link["url"])) as guest:
            sent = guest.upload(photo, profile="camera")
            assert guest.wait(sent["id"], timeout=60)["status"] == "ready"
        waiting = host.get(sent["id"])
        assert waiting["approval"] == "pending" and waiting["committed"] is False
        with pytest.raises(AirlockError) as empty:
            host.archive_link("event:8")  # nothing of the ref is available yet
        assert empty.value.status == 404
        assert host.approve([sent["id"]]) == {"approved": [sent["id"]]}
        assert host.approve(ref="event:8") == {"approved": []}  # nothing pending any more
        assert host.decline([sent["id"]]) == {"declined": []}  # decided already
        approved = host.get(sent["id"])
        assert approved["approval"] == "approved" and approved["ref"] == "event:8"
        album = host.archive_link("event:8")
        assert album["url"].startswith(live.server.base + "/api/v1/refs/event%3A8/archive?")
        answer = httpx.get(album["url"])  # no header: the link is the credential
        assert answer.status_code == 200
        with zipfile.ZipFile(io.BytesIO(answer.content)) as archive:
            assert archive.namelist() == ["dance.jpg"]
        web = host.archive_link("event:8", renditions="web")  # a photo goes in as it is served
        assert "renditions=web" in web["url"]
        with zipfile.ZipFile(io.BytesIO(httpx.get(web["url"]).content)) as archive:
            assert archive.namelist() == ["dance.jpg"]
        with pytest.raises(AirlockError) as bad:
            host.archive_link("event:8", renditions="poster")
        assert bad.value.status == 400
