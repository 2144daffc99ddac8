"""Only `serve` migrates by itself (embedded default or a brand-new database); every other command refuses."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.ops.conftest import ROOT
from tests.support.processes import free_port, wait_healthy

pytestmark = pytest.mark.slow

COMMANDS = [
    ["createuser", "alice", "--tenant", "acme"],
    ["sweep"],
    ["reconcile"],
    ["backfill", "--no-progress"],
    ["rescan", "--since", "7d"],
    ["consume_storage_events", "--sqs-queue-url", "http://127.0.0.1:9/queue", "--once"],
    ["recount_usage"],
    ["erase_user", "alice", "--dry-run"],
    ["erase_tenant", "acme", "--dry-run"],
    ["hold", "list"],
]


def _env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL" and not k.startswith("DJANGO_")}
    return {**env, "AIRLOCK_DATA_DIR": str(data_dir), "DJANGO_SETTINGS_MODULE": "config.settings.base", **extra}


def _manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_command_on_a_fresh_embedded_install_refuses_and_creates_nothing(tmp_path, command):
    data = tmp_path / "data"
    data.mkdir()
    result = _manage(_env(data), *command)
    assert result.returncode != 0
    assert "manage.py migrate" in result.stderr and "unapplied migration" in result.stderr
    database = data / "airlock.sqlite3"  # the settings pre-create it (0600); no table goes in it
    if database.exists():
        with sqlite3.connect(database) as db:
            assert db.execute("SELECT name FROM sqlite_master").fetchall() == []


def test_after_migrate_createuser_works(tmp_path):
    env = _env(tmp_path)
    assert _manage(env, "migrate").returncode == 0
    result = _manage(env, "createuser", "alice", "--tenant", "acme")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1]  # the token


def test_serve_migrates_the_embedded_default_on_its_first_run_and_says_so(tmp_path):
    env = _env(tmp_path, AIRLOCK_LOG_LEVEL="INFO")
    port = free_port()
    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", str(port), "--no-worker", "--no-scheduler"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc)
        assert "first run: applying migrations" in log.read_text()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert _manage(env, "createuser", "bob", "--tenant", "acme").returncode == 0


@pytest.fixture
def postgres_db():
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        pytest.fail("marked postgres but DATABASE_URL is not PostgreSQL")
    base = url.rsplit("/", 1)[0]
    name = f"airlock_guard_{uuid.uuid4().hex[:8]}"
    subprocess.run(["psql", f"{base}/postgres", "-qc", f"CREATE DATABASE {name}"], check=True)
    yield f"{base}/{name}"
    subprocess.run(["psql", f"{base}/postgres", "-qc", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"], check=False)


def _applied(url: str) -> str:
    return subprocess.run(
        ["psql", url, "-Atqc", "SELECT count(*) FROM django_migrations"], capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.mark.postgres
def test_on_postgresql_a_pending_migration_stops_every_command_and_serve(tmp_path, postgres_db):
    env = _env(tmp_path, DATABASE_URL=postgres_db)
    assert _manage(env, "migrate").returncode == 0
    assert _manage(env, "migrate", "sweeper", "0001").returncode == 0  # the deployed code is one ahead
    before = _applied(postgres_db)
    for command in (["sweep"], ["createuser", "alice", "--tenant", "acme"], ["serve", "--port", str(free_port())]):
        result = _manage(env, *command)
        assert result.returncode != 0, command
        assert "Run `python manage.py migrate` first" in result.stderr, result.stderr
    assert _applied(postgres_db) == before
