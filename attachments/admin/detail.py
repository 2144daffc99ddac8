"""The attachment's change page for support: status in words first, facts as a table, a short timeline.

The page answers "why is my file not showing?" before anything else: what
state the file is in and why, in a sentence; then the probed facts a person
reads (not raw JSON); then the last few events, with the whole history one
click away.
"""

from __future__ import annotations

import json
from typing import Any

from django.utils import timezone
from django.utils.html import format_html, format_html_join

from ..models import Attachment, Lifecycle, Status, TransitionLog


def preformatted(text: str) -> str:
    """Text shown as it is (an error, a payload), in the admin's preformatted style."""
    return format_html('<pre class="airlock-pre">{}</pre>', text)


# How many of the latest events the timeline shows before "show all".
TIMELINE_LAST = 5

_STATUS_WORDS = {
    Status.PENDING: "Waiting: the upload is announced or its bytes are queued for processing.",
    Status.PROCESSING: "Being processed (scan, checks, thumbnails): not served yet.",
    Status.READY: "Ready: scanned, checked and served to whoever may see it.",
    Status.REJECTED: "Rejected: the content was refused and is never served.",
    Status.FAILED: "Failed: processing gave up after its retries; a moderator can requeue it.",
}
_LIFECYCLE_WORDS = {
    Lifecycle.STAGED: "staged (not yet attached to anything; expires unless committed)",
    Lifecycle.COMMITTED: "committed to its ref",
    Lifecycle.DISCARDED: "discarded (the sweeper deletes it)",
    Lifecycle.RELEASED: "released by its owner (restorable until it expires)",
    Lifecycle.DELETED: "deleted",
}


def status_summary(attachment: Attachment) -> str:
    """The first thing on the page: status and reason in words, and where the file stands."""
    words = _STATUS_WORDS.get(Status(attachment.status), attachment.status)
    reason = ""
    if attachment.reason_code:
        reason = format_html(
            '<p class="airlock-summary-reason">Reason: <strong>{}</strong>{}</p>',
            attachment.reason_code,
            f" — {attachment.reason_message}" if attachment.reason_message else "",
        )
    lifecycle = _LIFECYCLE_WORDS.get(Lifecycle(attachment.lifecycle), attachment.lifecycle)
    return format_html(
        '<div class="airlock-summary airlock-summary-{}" id="airlock-summary" role="status">'
        '<p class="airlock-summary-status">{}</p>{}<p class="airlock-quiet">This file is {}.</p></div>',
        attachment.status,
        words,
        reason,
        lifecycle,
    )


def _cell(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return str(value)


# Facts with a section of their own on the page (previews.archive_listing); still in the raw JSON.
_SHOWN_APART = {"listing"}


def _rows(metadata: dict, prefix: str = "") -> list[tuple[str, str]]:
    """One row per fact; nested objects become dotted keys one level down (lists stay on one line)."""
    rows: list[tuple[str, str]] = []
    for key in sorted(k for k in metadata if prefix or k not in _SHOWN_APART):
        value = metadata[key]
        name = f"{prefix}{key}".replace("_", " ")
        if isinstance(value, dict) and not prefix:
            rows.extend(_rows(value, prefix=f"{key}."))
        else:
            rows.append((name, _cell(value)))
    return rows


def facts_table(metadata: dict | None) -> str:
    if not metadata:
        return "—"
    body = format_html_join("", "<tr><th>{}</th><td>{}</td></tr>", _rows(metadata))
    raw = json.dumps(metadata, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    return format_html(
        '<table class="airlock-facts">{}</table>'
        '<details class="airlock-raw"><summary>raw JSON</summary>'
        '<pre class="airlock-pre">{}</pre></details>',
        body,
        raw,
    )


def _event_rows(events: list[TransitionLog]) -> str:
    return format_html_join(
        "",
        "<tr><td>{}</td><td>{}</td><td>{} → {}</td><td>{}</td><td>{}</td></tr>",
        (
            (
                timezone.localtime(e.created_at).strftime("%Y-%m-%d %H:%M:%S"),
                e.transition,
                e.from_status,
                e.to_status,
                e.actor,
                " ".join(p for p in (e.reason_code, e.message) if p),
            )
            for e in events
        ),
    )


def timeline(attachment: Attachment) -> str:
    """The last TIMELINE_LAST events; the whole history in a <details> below them."""
    events = list(TransitionLog.objects.filter(attachment=attachment).order_by("created_at", "id"))
    if not events:
        return "—"
    head = "<tr><th>at</th><th>event</th><th>from → to</th><th>actor</th><th>reason, message</th></tr>"
    last = format_html(
        '<table class="airlock-timeline airlock-timeline-last"><thead>{}</thead><tbody>{}</tbody></table>',
        format_html(head),
        _event_rows(events[-TIMELINE_LAST:]),
    )
    if len(events) <= TIMELINE_LAST:
        return last
    return format_html(
        '{}<details class="airlock-timeline-all"><summary>Show all {} events</summary>'
        '<table class="airlock-timeline"><thead>{}</thead><tbody>{}</tbody></table></details>',
        last,
        len(events),
        format_html(head),
        _event_rows(events),
    )
