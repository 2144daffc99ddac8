"""GET /healthz and GET /readyz: each dependency down → 503 (every check listed), back → 200."""

from __future__ import annotations

import os
import time

import pytest
from django.db import connections

CHECKS = {"database", "broker", "storage", "scanner", "sandbox", "uploads", "brakes", "workers"}


@pytest.fixture(autouse=True)
def process_backends_kept(monkeypatch):
    """A test that points REDIS_URL at a dead port must not leave this process's shared backends
    (worker beats, tenant slots) built on it: monkeypatch puts the ones from before back."""
    from processing import liveness, tenant_slots

    monkeypatch.setattr(liveness.registry, "value", liveness.registry.value)
    monkeypatch.setattr(tenant_slots.backend, "value", tenant_slots.backend.value)


def _ready(client) -> tuple[int, dict]:
    response = client.get("/readyz")
    assert response["Content-Type"].startswith("application/json")
    return response.status_code, response.json()


def _assert_shape(body: dict) -> None:
    assert set(body["checks"]) == CHECKS
    for check in body["checks"].values():
        assert isinstance(check["ok"], bool)
        assert isinstance(check["latency_ms"], float)
        assert check["error"] is None if check["ok"] else isinstance(check["error"], str)


def test_healthz_needs_nothing(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_is_ok_when_everything_answers(client, db):
    status, body = _ready(client)
    assert status == 200, body
    assert body["status"] == "ok"
    _assert_shape(body)
    assert body["checks"]["scanner"]["scanners"]["yara"]["ok"] is True


def test_readyz_says_what_the_embedded_scanner_cannot_detect(client, db):
    yara = _ready(client)[1]["checks"]["scanner"]["scanners"]["yara"]
    assert "ZIP member" in yara["detects"] and "EICAR" in yara["detects"]
    assert "real malware" in yara["does_not_detect"] and "clamd" in yara["does_not_detect"]


@pytest.mark.skipif(os.geteuid() != 0, reason="CI and this machine run as root")
def test_readyz_reports_the_sandbox_confinement(client, db):
    status, body = _ready(client)
    assert body["checks"]["sandbox"] == {
        "ok": True,
        "latency_ms": body["checks"]["sandbox"]["latency_ms"],
        "error": None,
        "confinement": "uid+nnp+seccomp+landlock+nproc+subreaper",
        "missing": [],
        "state": "complete: uid+nnp+seccomp+landlock+nproc+subreaper applied",
        "unprotected": {},
    }


def test_readyz_reports_a_weakened_or_broken_sandbox_setting(client, db, monkeypatch):
    monkeypatch.setenv("AIRLOCK_SANDBOX_CONFINE", "seccomp")
    assert _ready(client)[1]["checks"]["sandbox"]["confinement"] in ("seccomp", "none")
    monkeypatch.setenv("AIRLOCK_SANDBOX_CONFINE", "seccomp,chroot")
    status, body = _ready(client)
    assert status == 503 and "chroot" in body["checks"]["sandbox"]["error"]


def test_each_worker_logs_its_confinement_at_boot(caplog):
    import dramatiq

    from processing.worker_boot import SandboxConfinementLog

    assert any(isinstance(m, SandboxConfinementLog) for m in dramatiq.get_broker().middleware)
    with caplog.at_level("INFO", logger="airlock.worker"):
        SandboxConfinementLog().after_worker_boot(dramatiq.get_broker(), None)
    record = next(r for r in caplog.records if r.name == "airlock.worker")
    assert record.getMessage().startswith("sandbox confinement ") and record.confinement


def test_readyz_needs_no_credentials_and_only_get(client, db):
    assert client.post("/readyz").status_code == 405
    assert client.get("/readyz").status_code == 200


def _database_down(config: dict, port: int) -> dict:
    if "sqlite3" in config["ENGINE"]:
        return {**config, "NAME": "/nonexistent-airlock-dir/down.sqlite3"}
    return {**config, "HOST": "127.0.0.1", "PORT": str(port)}


def test_readyz_fails_when_the_database_cannot_be_reached(client, db, monkeypatch, closed_port):
    original = connections.settings["default"]
    monkeypatch.setitem(connections.settings, "default", _database_down(original, closed_port))
    status, body = _ready(client)
    assert status == 503
    assert body["status"] == "unavailable"
    _assert_shape(body)
    assert body["checks"]["database"]["ok"] is False
    assert body["checks"]["storage"]["ok"] is True  # the others are still reported
    monkeypatch.setitem(connections.settings, "default", original)
    assert _ready(client)[0] == 200


@pytest.mark.postgres
def test_readyz_follows_postgresql(client, db, monkeypatch, closed_port, settings):
    original = connections.settings["default"]
    assert "postgresql" in original["ENGINE"], "the real run uses PostgreSQL: set DATABASE_URL"
    assert _ready(client)[0] == 200
    monkeypatch.setitem(connections.settings, "default", {**original, "HOST": "127.0.0.1", "PORT": str(closed_port)})
    status, body = _ready(client)
    assert status == 503
    assert "database" in body["checks"] and body["checks"]["database"]["ok"] is False
    assert body["checks"]["database"]["error"]
    monkeypatch.setitem(connections.settings, "default", original)
    status, body = _ready(client)
    assert status == 200, body
    assert body["checks"]["database"]["ok"] is True


def test_readyz_fails_when_redis_cannot_be_reached(client, db, settings, closed_port):
    settings.REDIS_URL = f"redis://127.0.0.1:{closed_port}/0"
    status, body = _ready(client)
    assert status == 503
    assert body["checks"]["broker"]["ok"] is False
    assert "Connection" in body["checks"]["broker"]["error"]


def test_stub_broker_is_always_up(client, db, settings):
    settings.REDIS_URL = None
    settings.RABBITMQ_URL = None
    _status, body = _ready(client)
    assert body["checks"]["broker"] == {
        "ok": True,
        "latency_ms": body["checks"]["broker"]["latency_ms"],
        "error": None,
    }


@pytest.mark.redis
def test_readyz_follows_redis(client, db, settings, closed_port):
    real = settings.REDIS_URL
    assert real, "the real run uses Redis: set REDIS_URL"
    assert _ready(client)[0] == 200
    settings.REDIS_URL = f"redis://127.0.0.1:{closed_port}/0"
    status, body = _ready(client)
    assert status == 503 and body["checks"]["broker"]["ok"] is False
    settings.REDIS_URL = real
    status, body = _ready(client)
    assert status == 200, body
    assert body["checks"]["broker"]["ok"] is True


def test_readyz_fails_when_storage_is_unusable(client, db, settings, tmp_path):
    from attachments.storage import reset_gateway

    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    settings.AIRLOCK_STORAGE_ROOT = blocker / "storage"
    reset_gateway()
    status, body = _ready(client)
    assert status == 503
    assert body["checks"]["storage"]["ok"] is False
    settings.AIRLOCK_STORAGE_ROOT = tmp_path / "storage"
    reset_gateway()
    assert _ready(client)[0] == 200


def test_readyz_fails_when_a_configured_clamd_is_unreachable(client, db, settings, tmp_path):
    settings.CLAMD_SOCKET = str(tmp_path / "no-clamd.sock")
    status, body = _ready(client)
    assert status == 503
    scanner = body["checks"]["scanner"]
    assert scanner["ok"] is False and "clamd" in scanner["error"]
    assert scanner["scanners"]["clamd"]["ok"] is False
    assert scanner["scanners"]["yara"]["ok"] is True


@pytest.mark.clamd
def test_readyz_follows_clamd(client, db, settings, private_clamd):
    settings.CLAMD_SOCKET = private_clamd.socket
    status, body = _ready(client)
    assert status == 200, body
    assert body["checks"]["scanner"]["scanners"]["clamd"]["ok"] is True
    private_clamd.stop()
    status, body = _ready(client)
    assert status == 503
    assert body["checks"]["scanner"]["scanners"]["clamd"]["ok"] is False
    private_clamd.start()
    status, body = _ready(client)
    assert status == 200, body


def test_a_hanging_check_cannot_hold_readyz(client, db, settings, monkeypatch):
    from ops import health

    monkeypatch.setattr(health, "TIMEOUT_SECONDS", 0.3)
    monkeypatch.setattr(health, "check_storage", lambda **kw: time.sleep(3))
    started = time.monotonic()
    status, body = _ready(client)
    elapsed = time.monotonic() - started
    assert status == 503
    assert body["checks"]["storage"]["error"] == "timed out after 0.3s"
    assert body["checks"]["database"]["ok"] is True
    assert elapsed < 2.0


def test_clamd_that_accepts_but_never_answers_times_out(client, db, settings, monkeypatch):
    """A black hole (listening, silent) is bounded by the readiness timeout, not the scan timeout."""
    import socket

    from ops import health

    monkeypatch.setattr(health, "TIMEOUT_SECONDS", 0.5)
    settings.AIRLOCK_SCAN_TIMEOUT = 120
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        settings.CLAMD_SOCKET = None
        settings.CLAMD_HOST = "127.0.0.1"
        settings.CLAMD_PORT = silent.getsockname()[1]
        started = time.monotonic()
        status, body = _ready(client)
        assert time.monotonic() - started < 2.0
    assert status == 503
    assert body["checks"]["scanner"]["ok"] is False
