"""The change page for support (#32 "See"): status and reason in words first, facts as a table,
the timeline collapsed to its last events with "show all"."""

from __future__ import annotations

import re

import pytest

from attachments.admin.detail import TIMELINE_LAST
from attachments.models import Attachment, TransitionLog
from tests.support import client_for, jpeg_bytes, run_pipeline, upload

pytestmark = pytest.mark.django_db


def _page(client, pk) -> str:
    response = client.get(f"/admin/attachments/attachment/{pk}/change/")
    assert response.status_code == 200
    return response.content.decode()


def test_a_rejected_file_leads_with_its_status_and_reason_in_words(browser_for, moderator, alice):
    bad = upload(client_for(alice), b"MZ this is no picture" * 6, filename="invoice.jpg")
    assert run_pipeline(bad) == "rejected"
    html = _page(browser_for(moderator), bad)
    summary = re.search(
        r'<div class="airlock-summary airlock-summary-rejected" id="airlock-summary".*?</div>', html, re.S
    )
    assert summary, "no summary"
    text = re.sub(r"<[^>]+>", "", summary.group(0))
    assert "Rejected: the content was refused and is never served." in text
    assert "Reason: type_not_allowed — " in text
    message = Attachment.objects.get(pk=bad).reason_message
    assert message and message in text.replace("&#x27;", "'").replace("&quot;", '"')
    # It comes before the first fieldset.
    assert html.index('id="airlock-summary"') < html.index("<fieldset")


def test_facts_are_a_table_with_the_raw_json_folded_away(browser_for, moderator, ready_image):
    metadata = Attachment.objects.get(pk=ready_image).metadata
    assert metadata
    html = _page(browser_for(moderator), ready_image)
    table = re.search(r'<table class="airlock-facts">(.*?)</table>', html, re.S)
    assert table, "no facts table"
    shown = dict(re.findall(r"<tr><th>([^<]+)</th><td>([^<]*)</td></tr>", table.group(1)))
    flat = {k: v for k, v in metadata.items() if not isinstance(v, (dict, list))}
    assert flat, metadata
    for key, value in flat.items():
        assert shown[key.replace("_", " ")] == str(value)
    assert '<details class="airlock-raw"><summary>raw JSON</summary>' in html


def test_the_timeline_shows_its_last_events_and_folds_the_rest(browser_for, moderator, ready_image):
    for i in range(TIMELINE_LAST + 2):
        TransitionLog.objects.create(
            attachment_id=ready_image, transition=f"probe-{i}", from_status="ready", to_status="ready", actor="test"
        )
    total = TransitionLog.objects.filter(attachment_id=ready_image).count()
    html = _page(browser_for(moderator), ready_image)
    last = re.search(r'<table class="airlock-timeline airlock-timeline-last">.*?<tbody>(.*?)</tbody>', html, re.S)
    assert last, "no timeline"
    shown = re.findall(r"<tr><td>[^<]*</td><td>([^<]+)</td>", last.group(1))
    assert shown == [f"probe-{i}" for i in range(2, TIMELINE_LAST + 2)]
    folded = re.search(
        r'<details class="airlock-timeline-all"><summary>Show all (\d+) events</summary>(.*?)'
        r"</details>",
        html,
        re.S,
    )
    assert folded and int(folded.group(1)) == total
    assert len(re.findall(r"<tr><td>", folded.group(2))) == total
    assert "upload" in folded.group(2) or "intent" in folded.group(2)


def test_a_short_timeline_has_nothing_to_fold(browser_for, moderator, alice):
    pk = upload(client_for(alice), jpeg_bytes((30, 20)), filename="new.jpg")
    assert TransitionLog.objects.filter(attachment_id=pk).count() <= TIMELINE_LAST
    html = _page(browser_for(moderator), pk)
    assert 'class="airlock-timeline airlock-timeline-last"' in html and "airlock-timeline-all" not in html
