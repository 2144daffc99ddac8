"""A burst of uploads in S3 mode on a busy machine is served slower, never refused.

Two hundred guests upload at once (intent -> POST to the bucket -> complete ->
status) while CPU hogs load both cores. Each web process has a pool of
AIRLOCK_DB_POOL=max=… PostgreSQL connections: requests held theirs for the whole
request (storage calls included) and gave up after a fixed 5 s wait, so the
queue behind the pool answered 503 UNAVAILABLE (134 of 200 intents). Every
request must succeed: with the defaults, and with a pool of 2 per web process
(the database the bottleneck: with a fixed 5 s wait, 41 of 150 were refused
even with the shared S3 client).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.s3.support import cpu_hogs, moto_bucket_env, stop_all, upload_burst
from tests.support import jpeg_bytes
from tests.support.env import EnvExtra
from tests.support.processes import Server

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis, pytest.mark.s3]

CLIENTS = 200
USERS = 10


def _busy_burst(tmp_path: Path, moto_endpoint: str, clients: int, extra_env: EnvExtra) -> None:
    server = Server(tmp_path, {**moto_bucket_env(moto_endpoint, "burst"), "AIRLOCK_LOG_LEVEL": "WARNING", **extra_env})
    hogs: list[subprocess.Popen] = []
    try:
        tokens = [server.createuser(f"guest{i}", "burst") for i in range(USERS)]
        image = jpeg_bytes((320, 240))
        hogs = cpu_hogs(2)
        burst = upload_burst(server.base, tokens, clients, image)
    finally:
        stop_all(hogs)
        server.stop()
    refusals = [line for line in (tmp_path / "serve.log").read_text().splitlines() if "unavailable" in line]
    assert not burst.failures, (
        f"{len(burst.failures)} failed in {burst.seconds:.1f} s: {burst.failures[:3]}; "
        f"{burst.statuses}; "
        f"log: {refusals[:3]}"
    )
    assert burst.statuses == {
        "intent 201": clients,
        "upload 204": clients,
        "complete 202": clients,
        "status 200": clients,
    }, burst.statuses
    print(f"burst of {clients}: {burst.seconds:.1f} s, slowest client {max(burst.durations):.1f} s")


def test_a_burst_of_s3_uploads_on_a_busy_machine_is_never_refused(tmp_path: Path, moto_endpoint):
    # The defaults as shipped (pool size, waits, processes): only the storage is chosen.
    _busy_burst(tmp_path, moto_endpoint, CLIENTS, {})


def test_a_burst_queues_for_a_small_pool_until_the_deadline_instead_of_refusing(tmp_path: Path, moto_endpoint):
    # The database is the bottleneck: 2 connections per web process. Requests wait past the
    # pool's 5 s timeout while connections keep coming back, within their 30 s deadline.
    _busy_burst(tmp_path, moto_endpoint, 150, {"AIRLOCK_DB_POOL": {"max": 2}})
