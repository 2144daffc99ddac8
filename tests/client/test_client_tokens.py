"""The Python client with client tokens, against `manage.py serve`: a host mints, a device uploads with it.

The host's client acts for its people with `subject=` (Airlock-Subject); the
device's client holds only the client token.
"""

from __future__ import annotations

import pytest

from airlock_client import AirlockError, Client, NotAuthenticated, NotFound, QuotaExceeded
from tests.support import jpeg_bytes

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def live(serve_factory):
    return serve_factory({}, users=(("host", "acme"),))


def test_a_device_uploads_reads_and_commits_with_its_client_token_only(live, tmp_path):
    path = tmp_path / "cat.jpg"
    path.write_bytes(jpeg_bytes((320, 240)))
    with live.client("host") as host:
        grant = host.mint_client_token("seller-1", 600, profiles=["image"], ref="ad:1", max_files=2)
        assert grant["token"].startswith("act_") and grant["subject"] == "seller-1"
        with Client(live.server.base, grant["token"]) as device:
            pending = device.upload(path, profile="image")
            assert pending["subject"] == "seller-1"
            assert device.wait(pending["id"], timeout=60)["status"] == "ready"
            saved = device.download(pending["id"], tmp_path / "back.jpg")
            assert saved.read_bytes() == path.read_bytes()
            with pytest.raises(AirlockError) as refused:
                device.commit([pending["id"]], "ad:2")
            assert refused.value.code == "CLIENT_TOKEN_SCOPE" and refused.value.status == 403
            assert device.commit([pending["id"]], "ad:1")["committed"] == [pending["id"]]
            with pytest.raises(AirlockError) as closed:
                device.usage()
            assert closed.value.code == "CLIENT_TOKEN_SCOPE"
            device.create_intent(profile="image", filename="b.jpg", size=10, content_type="image/jpeg")
            with pytest.raises(QuotaExceeded):  # max_files=2
                device.create_intent(profile="image", filename="c.jpg", size=10, content_type="image/jpeg")
            host.revoke_client_token(grant["id"])
            with pytest.raises(NotAuthenticated):
                device.get(pending["id"])


def test_a_host_acts_for_a_subject_and_logs_it_out(live, tmp_path):
    path = tmp_path / "cat.jpg"
    path.write_bytes(jpeg_bytes())
    with live.client("host") as host, live.client("host", subject="seller-2") as for_seller:
        other = for_seller.upload(path, profile="image")
        assert other["subject"] == "seller-2"
        token = host.mint_client_token("seller-3", 60)["token"]
        with Client(live.server.base, token) as device:
            with pytest.raises(NotFound):
                device.get(other["id"])  # another subject's file
            staged = device.upload(path, profile="image")
            assert host.logout_subject("seller-3") == {"revoked": 1, "discarded": 1}
            with pytest.raises(NotAuthenticated):
                device.get(staged["id"])
        assert host.get(staged["id"])["lifecycle"] == "discarded"
        assert for_seller.get(other["id"])["lifecycle"] == "staged"
