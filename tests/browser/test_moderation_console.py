"""A moderator at work in the admin, in a real browser, with the real worker processing uploads."""

import re

import pytest
from playwright.sync_api import expect

from attachments.models import Attachment, DeadLetter, TransitionLog
from tests.browser.conftest import sign_in
from tests.support import client_for, create_intent, jpeg_bytes, put_bytes, upload, wait_for_status

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _upload(user, data, filename):
    client = client_for(user)
    intent = create_intent(client, filename=filename, size=len(data)).json()
    assert put_bytes(intent["upload"]["url"], data).status_code == 202
    return intent["id"]


def test_moderator_finds_a_rejected_file_and_its_reason(page, live_worker, alice, moderator):
    good = _upload(alice, jpeg_bytes((200, 150)), "holiday.jpg")
    bad = _upload(alice, b"MZ this is no picture at all" * 4, "invoice.jpg")
    assert wait_for_status(bad, timeout=60) == "rejected"
    assert wait_for_status(good, timeout=60) == "ready"

    sign_in(page, "mod")
    page.locator("tr.model-attachment th a").click()
    page.locator("#changelist-filter").get_by_role("link", name="Rejected", exact=True).click()
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("invoice.jpg")
    expect(rows.first).to_contain_text("type_not_allowed")

    page.fill("#searchbar", "invoice")
    page.press("#searchbar", "Enter")
    page.get_by_role("link", name="invoice.jpg").click()
    reason = page.locator(".field-reason .readonly")
    expect(reason).to_contain_text("type_not_allowed")
    history = page.locator(".field-timeline")  # the transition history, its last events first
    expect(history).to_contain_text("reject")
    expect(history).to_contain_text("worker")
    expect(page.locator(".field-preview")).to_contain_text("no thumbnail")


def test_moderator_requeues_a_dead_letter(page, live_worker, alice, moderator, settings):
    from processing import scanners
    from processing.scanners import ScannerError

    def broken_scan(*args, **kwargs):
        raise ScannerError("clamd: connection refused")

    settings.AIRLOCK_RETRIES = settings.AIRLOCK_RETRIES.replace(max_attempts=2)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(scanners, "scan_all", broken_scan)  # the scanners fail, wherever the scan runs (in intake)
        flaky = _upload(alice, jpeg_bytes((120, 90)), "flaky.jpg")
        assert wait_for_status(flaky, timeout=60) == "failed"
    letter = DeadLetter.objects.get(attachment_id=flaky)

    sign_in(page, "mod")
    page.goto("/admin/attachments/deadletter/?state=open")
    row = page.locator("#result_list tbody tr").filter(has_text="flaky.jpg")
    expect(row).to_have_count(1)
    row.get_by_role("link").first.click()
    expect(page.locator(".field-error")).to_contain_text("clamd: connection refused")
    expect(page.locator(".airlock-history")).to_contain_text("scan: ScannerError")

    page.goto("/admin/attachments/deadletter/?state=open")
    page.locator("#result_list tbody tr").filter(has_text="flaky.jpg").locator("input.action-select").check()
    page.select_option("select[name=action]", "requeue_dead_letters")
    page.click("button[name=index]")
    expect(page.locator(".airlock-confirmation")).to_contain_text("flaky.jpg")
    page.get_by_role("button", name="Yes, requeue").click()
    expect(page.locator(".messagelist")).to_contain_text("Requeue: done for 1 dead letter")

    assert wait_for_status(flaky, timeout=60) == "ready"  # the scanner works again
    letter.refresh_from_db()
    assert letter.resolved_by == "staff:mod"
    assert TransitionLog.objects.filter(attachment_id=flaky, transition="retry", actor="staff:mod").exists()


def test_moderator_takes_down_a_ready_file(page, live_worker, alice, bob, moderator):
    photo = upload(client_for(alice), jpeg_bytes((640, 480)), filename="beach.jpg")
    assert wait_for_status(photo, timeout=60) == "ready"
    assert client_for(bob).get(f"/api/v1/attachments/{photo}/download").status_code == 200

    sign_in(page, "mod")
    page.goto(f"/admin/attachments/attachment/?q={photo}")
    page.get_by_role("link", name="beach.jpg").click()
    preview = page.locator("img.airlock-thumb")
    expect(preview).to_be_visible()
    page.wait_for_function("document.querySelector('img.airlock-thumb').naturalWidth > 0")
    assert page.evaluate("document.querySelector('img.airlock-thumb').naturalWidth") == 256

    page.click("a.airlock-action[data-action=take_down]")
    expect(page.locator("h1")).to_contain_text("Take down")
    page.fill("textarea[name=note]", "reported: not the uploader's photo")
    page.get_by_role("button", name="Yes, take down").click()
    expect(page.locator(".messagelist")).to_contain_text("Take down: done for 1 attachment")
    expect(page.locator(".field-reason .readonly")).to_contain_text("moderator")
    expect(page.locator(".field-status .readonly")).to_have_text(re.compile("rejected", re.I))

    assert client_for(bob).get(f"/api/v1/attachments/{photo}/download").status_code == 404
    assert client_for(alice).get(f"/api/v1/attachments/{photo}/download").status_code == 404
    attachment = Attachment.objects.get(pk=photo)
    assert (attachment.status, attachment.reason_code) == ("rejected", "moderator")
    assert TransitionLog.objects.get(attachment_id=photo, transition="take_down").actor == "staff:mod"


def test_killswitch_is_toggled_from_the_admin(page, moderator, settings):
    """The moderator group may pull the sweeper's brakes (nothing else of the settings)."""
    from sweeper.control import sweeper_control_get

    settings.AIRLOCK_SWEEPER_KILLSWITCH = None
    settings.AIRLOCK_SWEEPER_DRY_RUN = None
    sign_in(page, "mod")
    page.locator("tr.model-sweepercontrol th a").click()
    expect(page.locator("h1")).to_contain_text("sweeper control")
    killswitch = page.locator("#id_killswitch")
    expect(killswitch).not_to_be_checked()
    killswitch.check()
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("killswitch ON")
    expect(page.locator(".field-changed_by .readonly")).to_have_text("staff:mod")
    expect(page.locator(".field-effective .readonly")).to_contain_text("killswitch ON (database)")
    state = sweeper_control_get()
    assert state.killswitch is True and state.changed_by == "staff:mod"

    page.locator("#id_killswitch").uncheck()
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("killswitch off")
    assert sweeper_control_get().killswitch is False
