"""Paused uploads and active brakes are never silent: /readyz (degraded, 200), the dashboard and the upload page.

The issue's story: two minutes into a backfill the backlog check paused uploads
(`503 … new uploads are paused`) while `/readyz` said `ok` and the dashboard
said nothing.
"""

from __future__ import annotations

import json

import pytest

from sweeper.control import sweeper_control_set
from tests.support import client_for, create_intent

PAUSED = "New uploads are paused for tenant acme"


@pytest.fixture
def no_brake_overrides(settings):
    settings.AIRLOCK_SWEEPER_KILLSWITCH = None
    settings.AIRLOCK_SWEEPER_DRY_RUN = None


def _readyz(client, **headers: str) -> tuple[int, dict]:
    response = client.get("/readyz", **headers)
    return response.status_code, response.json()


def test_readyz_says_ok_with_nothing_degraded(client, transactional_db, no_brake_overrides):
    status, body = _readyz(client)
    assert status == 200 and body["status"] == "ok"
    assert body["checks"]["uploads"]["state"] == "ok" and body["checks"]["brakes"]["state"] == "ok"
    assert not [d for d in body["degraded"] if d.startswith(("uploads", "brakes"))]


def test_paused_uploads_show_on_readyz_as_degraded_with_the_reason(
    client, transactional_db, acme_behind, alice, no_brake_overrides, settings
):
    refused = create_intent(client_for(alice), size=10)
    assert refused.status_code == 503 and "paused" in refused.json()["error"]["message"]

    settings.AIRLOCK_METRICS_TOKEN = "metrics-secret"
    status, body = _readyz(client, HTTP_AUTHORIZATION="Bearer metrics-secret")
    assert status == 200 and body["status"] == "ok"  # degraded, as an accepted sandbox layer is: still ready
    uploads = body["checks"]["uploads"]
    assert uploads["ok"] is True and uploads["paused_tenants"] == ["acme"] and uploads["paused_tenant_count"] == 1
    assert uploads["state"].startswith("degraded: " + PAUSED)
    assert any(d.startswith("uploads: " + PAUSED) for d in body["degraded"])

    # Anyone else learns that uploads are paused, and for how many tenants; never which.
    for headers in ({}, {"HTTP_AUTHORIZATION": "Bearer wrong"}):
        status, public = _readyz(client, **headers)
        assert status == 200 and "acme" not in json.dumps(public)
        uploads = public["checks"]["uploads"]
        assert "paused_tenants" not in uploads and uploads["paused_tenant_count"] == 1
        assert uploads["state"].startswith("degraded: New uploads are paused for 1 tenant: ")
        assert any(d.startswith("uploads: New uploads are paused for 1 tenant") for d in public["degraded"])


def test_an_active_brake_shows_on_readyz_as_degraded(client, transactional_db, no_brake_overrides):
    sweeper_control_set(killswitch=True, actor="staff:ops")
    status, body = _readyz(client)
    assert status == 200
    assert (
        body["checks"]["brakes"]["state"] == "degraded: The sweeper's killswitch is on: no expired or "
        "discarded file is deleted."
    )
    assert "brakes: The sweeper's killswitch is on: no expired or discarded file is deleted." in body["degraded"]
    sweeper_control_set(killswitch=False, dry_run=True, actor="staff:ops")
    assert "dry-run" in _readyz(client)[1]["checks"]["brakes"]["state"]


def test_the_dashboard_shows_a_banner(db, moderator, browser_for, acme_behind, no_brake_overrides):
    sweeper_control_set(dry_run=True, actor="staff:ops")
    page = browser_for(moderator).get("/admin/dashboard/").content.decode()
    assert 'id="airlock-notices"' in page
    assert PAUSED in page and "dry-run mode" in page


def test_the_dashboard_has_no_banner_when_all_is_well(db, moderator, browser_for, no_brake_overrides):
    assert 'id="airlock-notices"' not in browser_for(moderator).get("/admin/dashboard/").content.decode()


def test_the_upload_page_shows_a_banner_for_its_own_tenant_only(
    db, alice, mallory, browser_for, acme_behind, no_brake_overrides
):
    page = browser_for(alice).get("/").content.decode()
    assert 'id="service-notices"' in page and PAUSED in page
    other = browser_for(mallory).get("/").content.decode()
    assert PAUSED not in other and 'id="service-notices"' not in other
