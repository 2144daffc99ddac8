"""Attacker-controlled text (filenames, extracted text, metadata, reasons, errors) renders escaped."""

import pytest
from django.utils import timezone

from attachments.models import Attachment, DeadLetter
from tests.support import client_for, jpeg_bytes, pdf_bytes, run_pipeline, upload

pytestmark = pytest.mark.django_db

SCRIPT_NAME = '<script>alert("name")</script>.pdf'  # stored with "/" as "_" (clean_filename)
IMG_NAME = '"><img src=x onerror=alert(1)>.jpg'
PDF_TEXT = '<script>alert("pdf")</script> "><img src=x onerror=alert(2)>'
NOTE = '<script>alert("note")</script>'
RAW = ("<script>alert", "<img src=x", "<img src=x onerror")


def _assert_escaped(html: str, *, expect=()):
    for raw in RAW:
        assert raw not in html
    for fragment in expect:
        assert fragment in html, fragment


@pytest.fixture
def hostile(alice, moderator):
    client = client_for(alice)
    pdf = upload(client, pdf_bytes(PDF_TEXT), profile="document", filename=SCRIPT_NAME, content_type="application/pdf")
    assert run_pipeline(pdf) == "ready"
    assert "<script>" in Attachment.objects.get(pk=pdf).text  # the extracted text really carries it
    image = upload(client, jpeg_bytes(), filename=IMG_NAME)
    assert run_pipeline(image) == "ready"
    Attachment.objects.filter(pk=image).update(metadata={"width": 64, "comment": PDF_TEXT})
    from attachments.services.moderation import attachment_take_down

    attachment_take_down(attachment_id=image, actor="staff:mod", note=NOTE)
    DeadLetter.objects.create(
        kind="processing",
        attachment_id=pdf,
        storage_key="tenants/acme/x",
        last_error=f"scan: {PDF_TEXT}",
        history=[{"attempt": 1, "at": "now", "error": NOTE}],
    )
    return {"pdf": pdf, "image": image}


def test_changelist_and_search_escape_filenames(hostile, moderator, browser_for):
    client = browser_for(moderator)
    for params in ({}, {"q": "script"}, {"q": "onerror"}, {"status__exact": "rejected"}):
        html = client.get("/admin/attachments/attachment/", params).content.decode()
        _assert_escaped(html)
    html = client.get("/admin/attachments/attachment/").content.decode()
    _assert_escaped(
        html,
        expect=(
            "&lt;script&gt;alert(&quot;name&quot;)&lt;_script&gt;.pdf",
            "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;.jpg",
        ),
    )


def test_detail_escapes_text_metadata_and_reason(hostile, moderator, browser_for):
    client = browser_for(moderator)
    pdf_page = client.get(f"/admin/attachments/attachment/{hostile['pdf']}/change/").content.decode()
    _assert_escaped(pdf_page, expect=("&lt;script&gt;alert(&quot;pdf&quot;)&lt;/script&gt;",))
    image_page = client.get(f"/admin/attachments/attachment/{hostile['image']}/change/").content.decode()
    _assert_escaped(
        image_page,
        expect=("&lt;script&gt;alert(&quot;note&quot;)&lt;/script&gt;", "&lt;img src=x onerror=alert(2)&gt;"),
    )


def test_confirmation_pages_escape(hostile, moderator, browser_for):
    client = browser_for(moderator)
    html = client.post(
        "/admin/attachments/attachment/",
        {"action": "moderate_rescan", "_selected_action": [hostile["pdf"], hostile["image"]]},
    ).content.decode()
    _assert_escaped(html, expect=("&lt;script&gt;alert(&quot;name&quot;)",))
    html = client.get(f"/admin/attachments/attachment/{hostile['image']}/moderate/restore/").content.decode()
    _assert_escaped(html, expect=("&lt;img src=x onerror=alert(1)&gt;",))
    letter = DeadLetter.objects.get()
    html = client.post(
        "/admin/attachments/deadletter/", {"action": "resolve_dead_letters", "_selected_action": [letter.pk]}
    ).content.decode()
    _assert_escaped(html)


def test_dead_letter_pages_escape(hostile, moderator, browser_for):
    client = browser_for(moderator)
    letter = DeadLetter.objects.get()
    _assert_escaped(client.get("/admin/attachments/deadletter/").content.decode())
    html = client.get(f"/admin/attachments/deadletter/{letter.pk}/change/").content.decode()
    _assert_escaped(html, expect=("&lt;script&gt;alert(&quot;note&quot;)&lt;/script&gt;",))


def test_audit_log_and_dashboard_escape(hostile, moderator, browser_for):
    client = browser_for(moderator)
    _assert_escaped(client.get("/admin/attachments/transitionlog/").content.decode())
    # A stuck file is listed by name on the dashboard.
    Attachment.objects.filter(pk=hostile["pdf"]).update(
        status="processing", lease_expires_at=timezone.now() - timezone.timedelta(minutes=5)
    )
    html = client.get("/admin/dashboard/").content.decode()
    _assert_escaped(html, expect=("&lt;script&gt;alert(&quot;name&quot;)&lt;_script&gt;.pdf",))
    _assert_escaped(client.get("/admin/").content.decode())
