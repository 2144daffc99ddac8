"""Prometheus counters for the sweeper: every run and every decision is counted."""

from __future__ import annotations

from prometheus_client import Counter

SWEEP_RUNS = Counter("airlock_sweeper_runs_total", "Sweep runs by mode.", ["mode"])
SWEEP_ROWS = Counter("airlock_sweeper_rows_total", "Rows handled by the sweeper, by outcome.", ["outcome"])
SWEEP_OBJECTS_DELETED = Counter("airlock_sweeper_objects_deleted_total", "Storage objects deleted by the sweeper.")
RECONCILE_FINDINGS = Counter("airlock_reconcile_findings_total", "Drift found by reconciliation, by kind.",
                             ["kind"])
