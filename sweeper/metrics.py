"""Prometheus counters for the sweeper: every run and every decision is counted."""

from __future__ import annotations

from prometheus_client import Counter

SWEEP_RUNS = Counter("airlock_sweeper_runs_total", "Sweep runs by mode.", ["mode"])
SWEEP_ROWS = Counter("airlock_sweeper_rows_total", "Rows dead-lettered or hard-deleted by the sweeper.", ["outcome"])
SWEEP_OBJECTS_DELETED = Counter("airlock_sweeper_objects_deleted_total", "Storage objects deleted by the sweeper.")
RECONCILE_FINDINGS = Counter("airlock_reconcile_findings_total", "Drift found by reconciliation, by kind.", ["kind"])
# One increment per attachment the sweeper deleted (objects gone, row marked deleted),
# and one per attachment whose delete failed this attempt (storage error; retried next
# tick, dead-lettered at the cap).
SWEEPER_DELETED = Counter("airlock_sweeper_deleted_total", "Attachments deleted by the sweeper.")
SWEEPER_ERRORS = Counter("airlock_sweeper_errors_total", "Attachment deletes that failed in a sweep.")
