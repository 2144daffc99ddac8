"""The dashboard's numbers: computed from the database, shown on /admin/dashboard/."""

from datetime import timedelta

import pytest
from django.utils import timezone

from attachments.admin import dashboard
from attachments.models import Attachment, DeadLetter, TransitionLog
from attachments.services.audit import AUDIT_EVENTS
from tests.support import client_for, create_intent, run_pipeline, upload

pytestmark = pytest.mark.django_db


def _intent(user, **fields):
    pk = create_intent(client_for(user), size=10).json()["id"]
    if fields:
        Attachment.objects.filter(pk=pk).update(**fields)
    return pk


def test_percentile_interpolates():
    values = [float(v) for v in range(1, 101)]
    assert dashboard.percentile(values, 50) == pytest.approx(50.5)
    assert dashboard.percentile(values, 99) == pytest.approx(99.01)
    assert dashboard.percentile([], 50) is None
    assert dashboard.percentile([3.0], 95) == 3.0


def test_status_distribution_counts_live_rows(alice):
    _intent(alice)
    _intent(alice, status="ready")
    _intent(alice, status="ready")
    _intent(alice, status="rejected", reason_code="malware")
    _intent(alice, status="ready", lifecycle="deleted")
    assert dashboard.status_distribution() == {"pending": 1, "processing": 0, "ready": 2, "rejected": 1, "failed": 0}


def test_time_to_ready_percentiles_per_window(alice):
    now = timezone.now()
    # Last hour: 1..10 seconds. Earlier today: 100 s. Two days ago: ignored.
    for seconds in range(1, 11):
        ready = now - timedelta(minutes=seconds)
        _intent(alice, status="ready", uploaded_at=ready - timedelta(seconds=seconds), ready_at=ready)
    ready = now - timedelta(hours=5)
    _intent(alice, status="ready", uploaded_at=ready - timedelta(seconds=100), ready_at=ready)
    ready = now - timedelta(days=2)
    _intent(alice, status="ready", uploaded_at=ready - timedelta(seconds=999), ready_at=ready)
    hour, day = dashboard.time_to_ready(now=now)
    assert (hour.window, hour.count) == ("last hour", 10)
    assert hour.p50 == pytest.approx(5.5)
    assert hour.p95 == pytest.approx(9.55)
    assert hour.p99 == pytest.approx(9.91)
    assert day.count == 11
    assert day.p50 == pytest.approx(6.0)
    assert day.p99 == pytest.approx(100 - 0.1 * 90, rel=1e-3)  # between the 10 s and 100 s samples


def test_scanner_outcomes_clean_infected_error(alice, ready_image, failed_image):
    _intent(alice, status="rejected", reason_code="malware")
    _intent(alice, status="rejected", reason_code="type_not_allowed")
    outcomes = dashboard.scanner_outcomes()
    # ready_image passed scanning; failed_image hit one scan error (retried), then failed.
    assert (outcomes.clean, outcomes.infected, outcomes.error) == (1, 1, 1)


def test_stuck_oldest_pending_and_dead_letters(alice):
    now = timezone.now()
    stuck = _intent(alice, status="processing", lease_expires_at=now - timedelta(minutes=3))
    _intent(alice, status="processing", lease_expires_at=now + timedelta(minutes=3))
    _intent(alice, uploaded_at=now - timedelta(minutes=42))
    _intent(alice, uploaded_at=now - timedelta(minutes=7))
    _intent(alice)  # an intent still waiting for its bytes does not count
    _intent(alice, uploaded_at=now - timedelta(hours=9), lifecycle="discarded")
    DeadLetter.objects.create(kind="processing", last_error="x")
    DeadLetter.objects.create(kind="sweep", last_error="y", resolved_at=now)
    assert [str(a.pk) for a in dashboard.stuck_in_processing(now=now)] == [stuck]
    assert dashboard.oldest_pending_age(now=now) == timedelta(minutes=42)
    assert dashboard.dead_letters_waiting() == 1


def test_timeline_buckets_transitions_by_hour_and_day(alice, ready_image):
    now = timezone.now()
    logs = TransitionLog.objects.filter(attachment_id=ready_image).exclude(transition__in=AUDIT_EVENTS).order_by("id")
    assert [log.to_status for log in logs] == ["processing", "ready"]
    TransitionLog.objects.filter(pk=logs[0].pk).update(created_at=now - timedelta(hours=3))
    hourly = dashboard.status_timeline(now=now, period="24h")
    assert len(hourly) == 24
    assert hourly[-1].counts["ready"] == 1
    assert hourly[-4].counts["processing"] == 1
    assert sum(b.total for b in hourly) == 2
    TransitionLog.objects.filter(pk=logs[0].pk).update(created_at=now - timedelta(days=3))
    daily = dashboard.status_timeline(now=now, period="14d")
    assert len(daily) == 14
    assert daily[-1].counts["ready"] == 1 and daily[-4].counts["processing"] == 1
    assert sum(b.total for b in dashboard.status_timeline(now=now, period="24h")) == 1


def test_timeline_counts_changes_only_not_rescans_that_stay_ready(alice, ready_image):
    from attachments.rescan.services import attachment_rescan_clean
    from attachments.services.moderation import attachment_rescan

    before = sum(b.counts["ready"] for b in dashboard.status_timeline())
    attachment_rescan(attachment_id=ready_image, actor="staff:x")  # staff asked: ready → ready
    attachment_rescan_clean(attachment_id=ready_image, signatures="clamav:1")  # and it came back clean
    assert TransitionLog.objects.filter(attachment_id=ready_image, transition="rescan").count() == 2
    assert sum(b.counts["ready"] for b in dashboard.status_timeline()) == before


def test_dashboard_page_shows_the_numbers_and_svg_charts(moderator, alice, ready_image, failed_image, browser_for):
    now = timezone.now()
    _intent(alice, status="processing", lease_expires_at=now - timedelta(minutes=3))
    bad = upload(client_for(alice), b"not an image at all", filename="bad.jpg")
    assert run_pipeline(bad) == "rejected"
    client = browser_for(moderator)
    index = client.get("/admin/").content.decode()
    assert 'href="/admin/dashboard/"' in index
    response = client.get("/admin/dashboard/")
    assert response.status_code == 200
    html = response.content.decode()
    main = html.split('id="content-main"')[1]
    assert main.count('<svg class="airlock-chart"') == 2 and "<rect" in main
    assert "<script" not in main  # server-side charts: no chart library, no CDN
    assert 'data-status="ready">1<' in html and 'data-status="rejected">1<' in html
    assert 'data-status="failed">1<' in html and 'data-status="processing">1<' in html
    for card, value in (("card-dead-letters", "1"), ("card-stuck", "1")):
        segment = html.split(f'id="{card}"')[1]
        assert f'<span class="airlock-card-value">{value}</span>' in segment.split("</a>")[0]
    assert 'title="clean">1<' in html and 'title="infected">0<' in html and 'title="error">1<' in html
    assert "last hour" in html and "last day" in html
    daily = client.get("/admin/dashboard/?period=14d").content.decode()
    assert "last 14 days, daily</strong>" in daily and "?period=24h" in daily
    assert client.get("/admin/dashboard/?period=bogus").status_code == 200


def test_dashboard_chart_geometry_stays_inside_the_plot():
    from attachments.admin import charts

    start = timezone.now()
    chart = charts.stacked_bars([(start, {"ready": 7, "rejected": 3}), (start, {"pending": 1})], label_format="%H:%M")
    assert len(chart.rects) == 3
    for rect in chart.rects:
        assert rect.y >= 0 and rect.y + rect.height <= chart.plot_bottom + 0.5
        assert chart.plot_left <= rect.x <= chart.plot_right
    assert chart.gridlines[-1].text == "10"
    assert charts.stacked_bars([], label_format="%H").rects == []
