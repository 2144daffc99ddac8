"""The banner on every admin page (#32 "Know"): paused uploads, brakes, scanner, confinement, dead letters,
each with a link to where it is fixed; cached so a page view is not a clamd round trip."""

from __future__ import annotations

import re

import pytest
from django.core.cache import cache

from attachments.models import DeadLetter
from attachments.services import backlog
from ops import banner, health
from sweeper.control import sweeper_control_set
from tests.support import client_for, jpeg_bytes, upload

PAGES = ("/admin/", "/admin/attachments/attachment/", "/admin/attachments/deadletter/")


@pytest.fixture(autouse=True)
def calm(settings, monkeypatch):
    """No brake overrides, scanner and confinement fine, no banner cache unless a test asks for one."""
    settings.AIRLOCK_SWEEPER_KILLSWITCH = None
    settings.AIRLOCK_SWEEPER_DRY_RUN = None
    monkeypatch.setattr(banner, "CACHE_SECONDS", 0)
    monkeypatch.setattr(health, "check_scanners", lambda timeout=None: {"clamd": {"ok": True}})
    monkeypatch.setattr(health, "check_sandbox", lambda: {"state": "ok"})
    cache.delete_many(["airlock:banner:dependencies", "airlock:banner:tenant:all"])


def _banner(response) -> list[tuple[str, str, str]]:
    """(kind, text, link) of each banner line."""
    assert response.status_code == 200
    html = response.content.decode()
    block = re.search(r'<ul class="airlock-banner" id="airlock-banner".*?</ul>', html, re.S)
    if block is None:
        return []
    lines = re.findall(r'<li class="warning" data-kind="([^"]+)">(.*?)</li>', block.group(0), re.S)
    out = []
    for kind, body in lines:
        link = re.search(r'<a href="([^"]+)">', body)
        out.append((kind, re.sub(r"<[^>]+>", "", body), link.group(1).replace("&amp;", "&") if link else ""))
    return out


def test_no_banner_when_all_is_well(db, moderator, browser_for):
    client = browser_for(moderator)
    for page in PAGES:
        assert _banner(client.get(page)) == []


def test_paused_uploads_show_on_every_admin_page_with_a_link_to_the_stuck_files(
    db, moderator, browser_for, alice, acme_behind
):
    client = browser_for(moderator)
    for page in PAGES:
        [(kind, text, link)] = _banner(client.get(page))
        assert kind == "uploads_paused" and "New uploads are paused for tenant acme" in text
        assert link == f"/admin/attachments/attachment/?question=late&tenant__id__exact={alice.membership.tenant_id}"
    # The link lists the files that pause uploads: late past the limit, long before "stuck over 30 minutes".
    listed = client.get(link).content.decode()
    assert len(re.findall(r'<th class="field-filename">', listed)) == backlog.QUEUE_DEPTH


def test_a_brake_links_to_the_sweeper_controls(db, moderator, browser_for):
    sweeper_control_set(killswitch=True, actor="staff:ops")
    [(kind, text, link)] = _banner(browser_for(moderator).get("/admin/"))
    assert kind == "brake" and "killswitch is on" in text
    assert link == "/admin/sweeper/sweepercontrol/"


def test_dead_letters_show_their_count_for_the_moderators_tenant_only(db, moderator, browser_for, alice, mallory):
    from attachments.services.staff import moderator_group_ensure

    pk = upload(client_for(mallory), jpeg_bytes((30, 20)), filename="evil.jpg")
    DeadLetter.objects.create(kind=DeadLetter.Kind.PROCESSING, attachment_id=pk, last_error="boom")
    [(kind, text, link)] = _banner(browser_for(moderator).get("/admin/attachments/attachment/"))
    assert kind == "dead_letters" and text.startswith("1 dead letter")
    assert link == "/admin/attachments/deadletter/?state=open"

    acme_mod = alice.__class__.objects.create_user("acme-mod", is_staff=True)
    from attachments.models import Membership

    Membership.objects.create(user=acme_mod, tenant=alice.membership.tenant)
    acme_mod.groups.add(moderator_group_ensure())
    assert _banner(browser_for(acme_mod).get("/admin/attachments/attachment/")) == []


def test_scanner_down_and_degraded_confinement_link_to_readyz(db, moderator, browser_for, monkeypatch):
    def down(timeout=None):
        raise RuntimeError("clamd: connection refused")

    monkeypatch.setattr(health, "check_scanners", down)
    monkeypatch.setattr(health, "check_sandbox", lambda: {"state": "degraded: no seccomp filter"})
    lines = _banner(browser_for(moderator).get("/admin/"))
    assert [(kind, link) for kind, _, link in lines] == [("scanner", "/readyz"), ("confinement", "/readyz")]
    assert "scanner is unavailable" in lines[0][1] and "degraded: no seccomp filter" in lines[1][1]


def test_the_scanner_is_pinged_once_per_cache_window(db, moderator, browser_for, monkeypatch, settings):
    monkeypatch.setattr(banner, "CACHE_SECONDS", 30)
    pings = []

    def counting(timeout=None):
        pings.append(timeout)
        return {}

    monkeypatch.setattr(health, "check_scanners", counting)
    client = browser_for(moderator)
    for page in PAGES * 2:
        client.get(page)
    assert len(pings) == 1
    assert pings[0] <= 1.0  # the banner's ping never waits the readiness timeout


def test_no_banner_for_non_staff_pages(db, alice, browser_for):
    sweeper_control_set(killswitch=True, actor="staff:ops")
    html = browser_for(alice).get("/").content.decode()
    assert "airlock-banner" not in html


def test_the_dashboard_gets_what_its_own_panel_lacks_once(db, moderator, browser_for, monkeypatch):
    def down(timeout=None):
        raise RuntimeError("clamd: connection refused")

    monkeypatch.setattr(health, "check_scanners", down)
    sweeper_control_set(killswitch=True, actor="staff:ops")
    html = browser_for(moderator).get("/admin/dashboard/")
    assert [kind for kind, _, _ in _banner(html)] == ["scanner"]  # the brake is in the dashboard's panel
    assert html.content.decode().count("killswitch is on") == 1
