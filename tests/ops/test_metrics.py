"""GET /metrics: each metric moves when its event happens; the bearer token; multi-process mode."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

from django.utils import timezone

from attachments.models import Attachment, DeadLetter
from tests.ops.conftest import ROOT, metric_value
from tests.support import EICAR, client_for, create_intent, jpeg_bytes, run_pipeline, upload


def test_metrics_is_prometheus_text_with_airlock_names(db, client):
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    text = response.content.decode()
    for name in (
        "airlock_attachments",
        "airlock_time_to_ready_seconds",
        "airlock_scan_results_total",
        "airlock_processing_stuck",
        "airlock_oldest_pending_seconds",
        "airlock_dead_letters",
        "airlock_sweeper_deleted_total",
        "airlock_sweeper_errors_total",
        "airlock_step_duration_seconds",
        "airlock_sandbox_kills_total",
    ):
        assert f"# HELP {name} " in text, name
    assert metric_value(text, "airlock_metrics_database_up") == 1.0


def test_metrics_token_when_configured(db, client, settings):
    settings.AIRLOCK_METRICS_TOKEN = "s3cret-metrics-token"
    for headers in (
        {},
        {"HTTP_AUTHORIZATION": "Bearer wrong"},
        {"HTTP_AUTHORIZATION": "Token s3cret-metrics-token"},
        {"HTTP_AUTHORIZATION": "Bearer "},
    ):
        response = client.get("/metrics", **headers)
        assert response.status_code == 401, headers
        assert response.json()["error"]["code"] == "NOT_AUTHENTICATED"
        assert response["WWW-Authenticate"].startswith("Bearer")
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-metrics-token")
    assert response.status_code == 200
    assert b"airlock_attachments" in response.content


def test_metrics_open_without_token(db, client, settings):
    settings.AIRLOCK_METRICS_TOKEN = None
    settings.AIRLOCK_METRICS = settings.AIRLOCK_METRICS.replace(open=True)  # the embedded default
    assert client.get("/metrics").status_code == 200


def test_metrics_closed_without_a_token_unless_opened(db, client, settings):
    """Production's default: no token and not explicitly opened is a 404, with nothing of the metrics."""
    settings.AIRLOCK_METRICS_TOKEN = None
    settings.AIRLOCK_METRICS = settings.AIRLOCK_METRICS.replace(open=False)
    response = client.get("/metrics")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "NOT_FOUND" and b"airlock_" not in response.content
    settings.AIRLOCK_METRICS_TOKEN = "s3cret-metrics-token"  # a token opens it to its bearer
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-metrics-token").status_code == 200


def test_tenant_labels_are_opt_in(alice, mallory, client, settings):
    settings.AIRLOCK_METRICS = settings.AIRLOCK_METRICS.replace(tenant_labels=False)  # the default
    create_intent(client_for(alice), size=321)
    create_intent(client_for(mallory), size=5)
    text = client.get("/metrics").content.decode()
    assert "airlock_tenant_" not in text and 'tenant="' not in text
    assert "acme" not in text and "evil" not in text  # no tenant slug anywhere
    settings.AIRLOCK_METRICS = settings.AIRLOCK_METRICS.replace(tenant_labels=True)
    text = client.get("/metrics").content.decode()
    assert metric_value(text, "airlock_tenant_bytes_used", {"tenant": "acme"}) == 321
    assert metric_value(text, "airlock_tenant_bytes_used", {"tenant": "evil"}) == 5


def test_attachments_gauge_counts_by_status_and_profile(alice, scrape):
    labels = {"status": "pending", "profile": "document"}
    before = metric_value(scrape(), "airlock_attachments", labels)
    assert metric_value(scrape(), "airlock_attachments", {"status": "ready", "profile": "media"}) == 0.0
    create_intent(client_for(alice), profile="document", filename="a.pdf", content_type="application/pdf")
    assert metric_value(scrape(), "airlock_attachments", labels) == before + 1


def test_pipeline_records_step_durations_scan_results_and_time_to_ready(alice, scrape, settings):
    settings.CLAMD_SOCKET = None
    settings.CLAMD_HOST = None
    text = scrape()
    steps = {
        s: metric_value(text, "airlock_step_duration_seconds_count", {"step": s}) for s in ("intake", "scan", "derive")
    }
    ran = {"intake": 1, "scan": 0, "derive": 1}  # intake runs the scan: no scan stage of its own
    clean = metric_value(text, "airlock_scan_results_total", {"scanner": "yara", "outcome": "clean"})
    ready = metric_value(text, "airlock_time_to_ready_seconds_count")
    pk = upload(client_for(alice), jpeg_bytes())
    assert run_pipeline(pk) == "ready"
    text = scrape()
    for step, count in steps.items():
        assert metric_value(text, "airlock_step_duration_seconds_count", {"step": step}) == count + ran[step], step
    assert metric_value(text, "airlock_scan_results_total", {"scanner": "yara", "outcome": "clean"}) == clean + 1
    assert metric_value(text, "airlock_time_to_ready_seconds_count") == ready + 1


def test_infected_upload_counts_an_infected_verdict(alice, scrape, settings):
    settings.CLAMD_SOCKET = None
    settings.CLAMD_HOST = None
    labels = {"scanner": "yara", "outcome": "infected"}
    before = metric_value(scrape(), "airlock_scan_results_total", labels)
    pk = upload(client_for(alice), EICAR)
    assert run_pipeline(pk) == "rejected"
    assert Attachment.objects.get(pk=pk).reason_code == "malware"
    assert metric_value(scrape(), "airlock_scan_results_total", labels) == before + 1


def test_scanner_error_counts_an_error_for_that_scanner(alice, scrape, settings, tmp_path):
    settings.CLAMD_SOCKET = str(tmp_path / "no-clamd.sock")
    labels = {"scanner": "clamd", "outcome": "error"}
    before = metric_value(scrape(), "airlock_scan_results_total", labels)
    pk = upload(client_for(alice), jpeg_bytes())
    assert run_pipeline(pk) == "pending"  # transient: retried later, never served
    assert metric_value(scrape(), "airlock_scan_results_total", labels) == before + 1


def test_processing_past_its_lease_is_stuck(alice, scrape):
    pk = upload(client_for(alice), jpeg_bytes())
    before = metric_value(scrape(), "airlock_processing_stuck")
    Attachment.objects.filter(pk=pk).update(status="processing", lease_expires_at=timezone.now() - timedelta(seconds=5))
    assert metric_value(scrape(), "airlock_processing_stuck") == before + 1
    Attachment.objects.filter(pk=pk).update(lease_expires_at=timezone.now() + timedelta(minutes=5))
    assert metric_value(scrape(), "airlock_processing_stuck") == before


def test_oldest_pending_upload_age(alice, scrape):
    Attachment.objects.filter(status="pending").update(status="ready")  # only ours counts
    assert metric_value(scrape(), "airlock_oldest_pending_seconds") == 0.0
    create_intent(client_for(alice))  # an intent without bytes is not a backlog
    assert metric_value(scrape(), "airlock_oldest_pending_seconds") == 0.0
    pk = upload(client_for(alice), jpeg_bytes())
    Attachment.objects.filter(pk=pk).update(uploaded_at=timezone.now() - timedelta(minutes=10))
    age = metric_value(scrape(), "airlock_oldest_pending_seconds")
    assert 600 <= age < 700


def test_unresolved_dead_letters(db, scrape):
    labels = {"kind": "processing"}
    before = metric_value(scrape(), "airlock_dead_letters", labels)
    letter = DeadLetter.objects.create(kind=DeadLetter.Kind.PROCESSING, last_error="boom")
    assert metric_value(scrape(), "airlock_dead_letters", labels) == before + 1
    letter.resolved_at = timezone.now()
    letter.save()
    assert metric_value(scrape(), "airlock_dead_letters", labels) == before


def test_sandbox_kill_is_counted_by_reason(alice, scrape, settings):
    settings.CLAMD_SOCKET = None
    settings.CLAMD_HOST = None
    settings.AIRLOCK_SANDBOX_LIMITS = settings.AIRLOCK_SANDBOX_LIMITS.replace(wall_seconds=0.02)
    labels = {"reason": "timeout"}
    before = metric_value(scrape(), "airlock_sandbox_kills_total", labels)
    pk = upload(client_for(alice), _slow_png())
    assert run_pipeline(pk) == "rejected"
    assert Attachment.objects.get(pk=pk).reason_code == "timeout"
    # Two kills: the job, and its solo re-run (processing/sandbox/solo.py) that confirmed it.
    assert metric_value(scrape(), "airlock_sandbox_kills_total", labels) == before + 2


def _slow_png() -> bytes:
    """A PNG of noise that takes far longer than 20 ms to decode and thumbnail."""
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.frombytes("RGB", (1500, 1500), os.urandom(1500 * 1500 * 3)).save(buf, "PNG", compress_level=1)
    return buf.getvalue()


def test_database_trouble_does_not_break_the_scrape(db, client, monkeypatch):
    from django.db import DatabaseError

    def broken(*args, **kwargs):
        raise DatabaseError("database is down")

    monkeypatch.setattr(DeadLetter.objects, "filter", broken)
    response = client.get("/metrics")
    assert response.status_code == 200
    text = response.content.decode()
    assert metric_value(text, "airlock_metrics_database_up") == 0.0
    assert "airlock_scan_results_total" in text or "airlock_scan_results" in text


_CHILD = """
import django, os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
django.setup()
from processing.metrics import SCAN_RESULTS
from sweeper.metrics import SWEEPER_DELETED
SCAN_RESULTS.labels(scanner="clamd", outcome="infected").inc()
SWEEPER_DELETED.inc(3)
"""

_SCRAPE = """
import django, os
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
django.setup()
from ops.metrics import render_latest
print(render_latest()[0].decode())
"""


def test_multiprocess_dir_aggregates_every_process(tmp_path):
    """With PROMETHEUS_MULTIPROC_DIR, /metrics sums the counters of all processes (web and workers)."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    for _ in range(2):
        subprocess.run([sys.executable, "-c", _CHILD], env=env, cwd=ROOT, check=True, timeout=60)
    assert list(Path(tmp_path).glob("counter_*.db"))
    out = subprocess.run(
        [sys.executable, "-c", _SCRAPE],
        env=env,
        cwd=ROOT,
        check=True,
        timeout=60,
        capture_output=True,
        text=True,
    ).stdout
    assert metric_value(out, "airlock_scan_results_total", {"scanner": "clamd", "outcome": "infected"}) == 2.0
    assert metric_value(out, "airlock_sweeper_deleted_total") == 6.0


def test_sweeper_deletes_and_errors_are_counted(alice, scrape, storage_root):
    from attachments.storage import get_gateway
    from sweeper.locks import NoLock
    from sweeper.sweep import sweep_expired

    client = client_for(alice)
    gone = upload(client, jpeg_bytes())
    assert client.post(f"/api/v1/attachments/{gone}/discard").status_code == 204
    text = scrape()
    deleted = metric_value(text, "airlock_sweeper_deleted_total")
    errors = metric_value(text, "airlock_sweeper_errors_total")
    sweep_expired(now=timezone.now() + timedelta(seconds=1), lock=NoLock())
    assert metric_value(scrape(), "airlock_sweeper_deleted_total") == deleted + 1

    class Failing:
        def __init__(self, inner):
            self._inner = inner

        def __getattr__(self, name):
            return getattr(self._inner, name)

        def delete(self, key):
            raise OSError("storage refused the delete")

    stuck = upload(client, jpeg_bytes())
    assert client.post(f"/api/v1/attachments/{stuck}/discard").status_code == 204
    sweep_expired(now=timezone.now() + timedelta(seconds=1), lock=NoLock(), gateway=Failing(get_gateway()))
    assert metric_value(scrape(), "airlock_sweeper_errors_total") == errors + 1
