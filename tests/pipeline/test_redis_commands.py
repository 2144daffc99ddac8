"""Redis commands per photo, pinned: what a file costs a shared broker must not creep back.

bench/redis_bench.py runs photos through the intent and PUT services and the
worker `serve` runs (Dramatiq on the Redis broker, tenant slots, liveness)
against a redis-server of its own, and counts every command with MONITOR, by
name and by sender; the idle rate, taken over a quiet interval with the worker
running, is subtracted. It runs as a child process so that every Redis client
the code makes, whatever module makes it, points at that private server.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from processing.stages import INTAKE, STAGES

REPO = Path(__file__).resolve().parents[2]

# Each stage's job: its send (ringing the queue's bell), the fetch, the idle consumer's wait
# on the bell that the send ends, the ack, and the tenant slot's acquire and release.
PER_STAGE = {
    "dramatiq.enqueue_ring": 1,
    "dramatiq.fetch": 1,
    "dramatiq.doorbell": 1,
    "dramatiq.ack": 1,
    "slots.acquire_or_park": 1,
    "slots.release_and_pop": 1,
}
# Each file: the intent's rate limit, and the two status changes announced to waiters (processing, ready).
PER_FILE = {"ratelimit": 1, "waiting.publish": 2}
# An idle consumer's wait running out (a wait and a look) may fall inside the photos' interval
# rather than the quiet one: a command or so per photo either way.
SLACK = 1.0


def stages_per_file() -> int:
    """The stages a file passes through, from intake on (the scan stage serves only files already at it)."""
    count, stage = 0, INTAKE.name
    while stage is not None:
        count, stage = count + 1, STAGES[stage].next
    return count


def expected_by_sender() -> dict[str, int]:
    stages = stages_per_file()
    return {**{sender: n * stages for sender, n in PER_STAGE.items()}, **PER_FILE}


@pytest.fixture(scope="module")
def counts(tmp_path_factory) -> dict:
    assert shutil.which("redis-server"), "the count needs a redis-server of its own (apt-get install redis-server)"
    tmp = tmp_path_factory.mktemp("redis-count")
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "REDIS_URL", "RABBITMQ_URL", "CLAMD_SOCKET", "CLAMD_HOST", "CLAMD_PORT")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.base",
        BENCH_TMP=str(tmp),
        AIRLOCK_DATA_DIR=str(tmp / "data"),
        AIRLOCK_LOG_LEVEL="WARNING",
    )
    proc = subprocess.run(
        [sys.executable, "bench/redis_bench.py", "--photos", "3", "--quiet-seconds", "10"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith('{"redis_')]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    found = json.loads(lines[-1])
    # Every command was seen: the recorder ran throughout and parsed every line.
    assert found["redis_monitor_unparsed"] == 0, found
    return found


@pytest.mark.redis
def test_a_photo_costs_the_broker_its_pinned_commands_by_sender(counts):
    measured = counts["redis_commands_by_sender_per_photo"]
    expected = expected_by_sender()
    for sender, n in expected.items():
        assert abs(measured.get(sender, 0) - n) <= SLACK, (sender, measured)
    # Nothing else per photo: the worker's beat and connections are time-based, in the idle rate.
    others = {s: v for s, v in measured.items() if s not in expected and abs(v) > SLACK}
    assert not others, others
    assert counts["redis_commands_per_photo"] <= sum(expected.values()) + 2 * SLACK, counts
    assert counts["redis_commands_per_photo"] <= 30


@pytest.mark.redis
def test_a_photo_costs_the_broker_its_pinned_commands_by_name(counts):
    stages = stages_per_file()
    measured = counts["redis_commands_by_name_per_photo"]
    # Every script is one EVALSHA: send, fetch, ack, acquire, release per stage; the rate limit per file.
    assert abs(measured.get("evalsha", 0) - (5 * stages + 1)) <= 2 * SLACK, measured
    assert abs(measured.get("blpop", 0) - stages) <= SLACK, measured
    assert abs(measured.get("publish", 0) - 2) <= SLACK, measured
    assert not {n: v for n, v in measured.items() if n not in ("evalsha", "blpop", "publish") and abs(v) > SLACK}
    # What those scripts run inside Redis, counted as INFO counts commands.
    assert counts["redis_commands_executed_per_photo"] <= 30 * stages, counts


@pytest.mark.redis
def test_an_idle_worker_does_not_poll_the_broker(counts):
    assert counts["redis_commands_per_photo"] > 0, counts  # the recorder saw the photos go through
    # Dramatiq's consumers asked each of their queues about ten times a second (over 120 commands/s
    # per worker process here); waiting on a bell, an idle worker sends its beat and a look per wait.
    assert counts["redis_idle_commands_per_s"] <= 5, counts
    assert counts["redis_idle_wait_commands_per_s"] <= 5, counts
