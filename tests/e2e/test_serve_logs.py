"""`serve`'s own server logs (gunicorn's error and access lines) are the app's JSON lines, credentials redacted."""

from __future__ import annotations

import json

import pytest
import requests

from tests.support.processes import Server, raw


@pytest.mark.slow
def test_server_error_and_access_lines_are_json_and_never_carry_a_signature(tmp_path, monkeypatch):
    for name in ("DATABASE_URL", "REDIS_URL"):  # the embedded default: only the server's logging is under test
        monkeypatch.delenv(name, raising=False)
    server = Server(tmp_path, {"AIRLOCK_SERVE": {"access_log": 1}, "AIRLOCK_LOG_LEVEL": "INFO"})
    try:
        assert (
            requests.get(
                f"{server.base}/healthz?token=ACCESS-SECRET-1&X-Amz-Signature=ACCESS-SECRET-2", timeout=10
            ).status_code
            == 200
        )
        # A request line gunicorn itself refuses (no version): it logs the whole line it read.
        status, body = raw(
            server.port,
            b"GET /api/v1/uploads/x/content?token=ERROR-SECRET-3&X-Amz-Signature=ERROR-SECRET-4\r\nHost: x\r\n\r\n",
        )
        assert status == 400, body
    finally:
        server.stop()
    text = (tmp_path / "serve.log").read_text()
    assert "SECRET-" not in text, text[-3000:]
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    access = [e for e in lines if e.get("logger") == "gunicorn.access"]
    assert any(e["path"] == "/healthz" and str(e["status"]) == "200" for e in access), access
    refused = [e for e in lines if e.get("logger") == "gunicorn.error" and "Invalid request" in e["event"]]
    assert refused and "token=[redacted]" in refused[0]["event"], lines[-10:]
    # nothing of gunicorn's own text format ("[2026-…] [pid] [LEVEL] …") is left
    assert not [line for line in text.splitlines() if line.startswith("[") and "] [" in line], text[-3000:]
