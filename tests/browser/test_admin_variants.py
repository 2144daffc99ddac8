"""A moderator on a 2× screen: the change page's preview takes a variant from its srcset, the variants box
lists it, and Purge variants (confirmed) empties it."""

import pytest
from playwright.sync_api import expect

from attachments.models import Derivative, TransitionLog
from tests.browser.conftest import sign_in
from tests.support import client_for, jpeg_bytes, upload, wait_for_status

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_moderator_sees_a_variant_in_the_preview_and_purges_it(page_at, live_server, live_worker, alice, moderator):
    page = page_at(2)
    attachment_id = upload(client_for(alice), jpeg_bytes((3000, 2000)), filename="wide.jpg")
    assert wait_for_status(attachment_id, timeout=60) == "ready"
    change = f"/admin/attachments/attachment/{attachment_id}/change/"
    sign_in(page, "mod", next_url=change)
    page.wait_for_url(f"{live_server.url}{change}")

    # 256 CSS px at 2×: the 256 px thumbnail is not enough, the browser takes `small` (640 w).
    thumb = page.locator(".field-preview img.airlock-thumb")
    page.wait_for_function("el => el.complete && el.naturalWidth > 0", arg=thumb.element_handle(), timeout=60_000)
    assert page.evaluate("el => el.currentSrc", thumb.element_handle()).endswith(
        f"/admin/attachments/attachment/{attachment_id}/variant/small/"
    )
    assert Derivative.objects.filter(attachment_id=attachment_id, kind="variant:small:webp").exists()

    page.reload()
    box = page.locator("#airlock-variants")
    expect(box.locator('tr[data-variant="small:webp"]')).to_have_count(1)
    box.locator("#airlock-purge-variants").click()
    expect(page.locator(".airlock-confirmation")).to_contain_text("variants")
    page.locator(".airlock-confirmation input[type=submit]").first.click()
    page.wait_for_url(f"{live_server.url}{change}")
    expect(page.locator("#airlock-no-variants")).to_have_text("None made yet.")
    assert (
        TransitionLog.objects.filter(
            attachment_id=attachment_id, transition="variants_purged", actor="staff:mod"
        ).count()
        == 1
    )
