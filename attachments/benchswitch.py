"""The bench switch: the one place a measured speed trick asks whether it is on.

AIRLOCK_BENCH_DISABLE=name[,name…] turns the named tricks off, so a bench can
measure the same figure with and without each in one run (bench/tricks_bench.py).
Read on every call (an environment lookup, about a microsecond) so a bench can
flip it between paired rounds in one process. Unset in production: every trick on.
"""

from __future__ import annotations

import os

ENV = "AIRLOCK_BENCH_DISABLE"


def trick_on(name: str) -> bool:
    """False when `name` is listed in AIRLOCK_BENCH_DISABLE."""
    value = os.environ.get(ENV)
    return not value or name not in value.split(",")
