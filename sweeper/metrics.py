"""Prometheus counters for the sweeper: every run and every decision is counted.

Rows deleted and failed deletes go to airlock_sweeper_deleted_total and
airlock_sweeper_errors_total, declared with the other ops metrics in
processing/metrics.py.
"""

from __future__ import annotations

from prometheus_client import Counter

SWEEP_RUNS = Counter("airlock_sweeper_runs_total", "Sweep runs by mode.", ["mode"])
SWEEP_ROWS = Counter("airlock_sweeper_rows_total", "Rows dead-lettered or hard-deleted by the sweeper.",
                     ["outcome"])
SWEEP_OBJECTS_DELETED = Counter("airlock_sweeper_objects_deleted_total", "Storage objects deleted by the sweeper.")
RECONCILE_FINDINGS = Counter("airlock_reconcile_findings_total", "Drift found by reconciliation, by kind.",
                             ["kind"])
