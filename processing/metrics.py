"""Prometheus metrics recorded by the pipeline (multi-process safe via PROMETHEUS_MULTIPROC_DIR)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

SCAN_RESULTS = Counter("airlock_scan_results_total", "Scanner verdicts by scanner and outcome.", ["scanner", "outcome"])
STEP_SECONDS = Histogram(
    "airlock_step_duration_seconds",
    "Duration of each pipeline step.",
    ["step"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
TIME_TO_READY = Histogram(
    "airlock_time_to_ready_seconds",
    "Time from bytes landing to ready.",
    buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600),
)
SANDBOX_KILLS = Counter("airlock_sandbox_kills_total", "Sandbox children killed, by reason.", ["reason"])
STEP_OUTCOMES = Counter("airlock_step_outcomes_total", "Pipeline step outcomes.", ["step", "outcome"])


def record_scan_verdicts(verdicts) -> None:
    for verdict in verdicts:
        SCAN_RESULTS.labels(scanner=verdict.scanner, outcome=verdict.outcome).inc()


# Archive members are scanned with YARA inside the sandbox job (processing/sandbox/
# archives.py): one verdict per archive whose members were scanned, under this scanner name.
MEMBER_SCANNER = "yara_members"


def record_member_scan(outcome: str) -> None:
    SCAN_RESULTS.labels(scanner=MEMBER_SCANNER, outcome=outcome).inc()


def record_scan_error(scanner: str) -> None:
    SCAN_RESULTS.labels(scanner=scanner, outcome="error").inc()


def record_sandbox(result) -> None:
    killed = getattr(result, "killed_by", None)
    if killed:
        SANDBOX_KILLS.labels(reason=killed).inc()


# Rescans of ready files (processing/rescan/jobs.py): each job's outcome (clean, rejected,
# error, limit, current, skipped), and the files the background walk queued.
RESCAN_OUTCOMES = Counter("airlock_rescan_outcomes_total", "Rescans of ready files by outcome.", ["outcome"])
RESCAN_QUEUED = Counter("airlock_rescan_queued_total", "Ready files queued for a rescan by the background walk.")
