"""The sweeper's control object and runs in the admin."""

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission
from django.utils import timezone

from sweeper.control import sweeper_control_get
from sweeper.models import SweeperControl, SweepRun

pytestmark = pytest.mark.django_db

CONTROL = "/admin/sweeper/sweepercontrol/1/change/"


@pytest.fixture(autouse=True)
def _no_brake_overrides(settings):
    settings.AIRLOCK_SWEEPER_KILLSWITCH = None
    settings.AIRLOCK_SWEEPER_DRY_RUN = None


@pytest.fixture
def operator(make_user):
    from attachments.services.staff import platform_staff_group_ensure

    user = make_user("operator", tenant="staff", staff=True)
    user.groups.add(platform_staff_group_ensure())
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="sweeper",
            codename__in=["view_sweepercontrol", "change_sweepercontrol", "view_sweeprun"],
        )
    )
    return user


def test_the_list_is_the_single_control_object(operator, browser_for):
    response = browser_for(operator).get("/admin/sweeper/sweepercontrol/")
    assert response.status_code == 302 and response["Location"] == CONTROL
    page = browser_for(operator).get(CONTROL)
    assert page.status_code == 200
    assert "No sweep has run yet." in page.content.decode()
    assert browser_for(operator).get("/admin/sweeper/sweepercontrol/2/change/").status_code == 302


def test_toggling_the_brakes_records_who_and_when(operator, browser_for):
    client = browser_for(operator)
    response = client.post(CONTROL, {"killswitch": "on", "dry_run": ""})
    assert response.status_code == 302
    state = sweeper_control_get()
    assert state.killswitch is True and state.dry_run is False
    assert state.changed_by == "staff:operator" and state.changed_at is not None
    assert LogEntry.objects.filter(user=operator, object_id="1").exists()
    page = client.get(CONTROL).content.decode()
    assert "staff:operator" in page and "killswitch <strong>ON</strong> (database)" in page

    client.post(CONTROL, {"killswitch": "", "dry_run": "on"})
    state = sweeper_control_get()
    assert (state.killswitch, state.dry_run) == (False, True)
    assert SweeperControl.objects.count() == 1


def test_an_environment_pin_is_shown_and_wins(operator, browser_for, settings):
    settings.AIRLOCK_SWEEPER_KILLSWITCH = "1"
    client = browser_for(operator)
    response = client.post(CONTROL, {"killswitch": "", "dry_run": ""}, follow=True)
    html = response.content.decode()
    assert "pinned by AIRLOCK_SWEEPER_KILLSWITCH" in html
    assert "killswitch <strong>ON</strong> (settings)" in html
    assert sweeper_control_get().killswitch is True


def test_staff_outside_the_moderator_group_cannot_touch_the_brakes(viewer, browser_for):
    client = browser_for(viewer)
    assert client.get(CONTROL).status_code == 403
    assert client.post(CONTROL, {"killswitch": "on"}).status_code == 403
    assert sweeper_control_get().killswitch is False


def test_moderators_can_pull_the_brakes(moderator, browser_for):
    client = browser_for(moderator)
    assert client.get(CONTROL).status_code == 200
    client.post(CONTROL, {"killswitch": "on", "dry_run": ""})
    assert sweeper_control_get().killswitch is True


def test_recent_runs_and_would_delete_keys_escaped(operator, browser_for):
    now = timezone.now()
    SweepRun.objects.create(started_at=now, finished_at=now, mode="normal", selected=3, deleted=3, objects_deleted=5)
    dry = SweepRun.objects.create(
        started_at=now - timezone.timedelta(minutes=30),
        mode="dry_run",
        selected=2,
        would_delete=["tenants/acme/image/1", "tenants/acme/<script>alert(1)</script>"],
    )
    client = browser_for(operator)
    html = client.get(CONTROL).content.decode()
    assert "tenants/acme/image/1" in html and "2 keys" in html
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    detail = client.get(f"/admin/sweeper/sweeprun/{dry.pk}/change/").content.decode()
    assert "tenants/acme/image/1" in detail and "<script>alert" not in detail
    listing = client.get("/admin/sweeper/sweeprun/").content.decode()
    assert "dry_run" in listing or "Dry Run" in listing


def test_reconcile_runs_are_shown_with_why_nothing_was_deleted(moderator, browser_for):
    from sweeper.models import ReconcileRun

    now = timezone.now()
    held = ReconcileRun.objects.create(
        started_at=now, finished_at=now, mode="killswitch", scanned=4, kept=2, note="killswitch on: nothing deleted"
    )
    ReconcileRun.objects.create(
        started_at=now - timezone.timedelta(hours=1), mode="dry_run", would_delete=["tenants/acme/image/<b>x</b>"]
    )
    client = browser_for(moderator)
    html = client.get(CONTROL).content.decode()
    assert "Recent reconcile runs" in html and "killswitch on: nothing deleted" in html
    assert "<b>x</b>" not in html
    detail = client.get(f"/admin/sweeper/reconcilerun/{held.pk}/change/")
    assert detail.status_code == 200 and "killswitch on: nothing deleted" in detail.content.decode()
    assert "killswitch" in client.get("/admin/sweeper/reconcilerun/").content.decode()
