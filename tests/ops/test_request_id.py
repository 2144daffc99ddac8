"""Structured logs: the web request's id follows the attachment into the worker's log lines."""

from __future__ import annotations

import json
import logging
import threading
import uuid
from urllib.parse import urlsplit

import dramatiq
import pytest
from dramatiq.brokers.stub import StubBroker

from attachments.request_id import current_request_id, set_request_id
from ops.logging import JsonFormatter
from processing.request_context import RequestIdMiddleware
from tests.support import client_for, create_intent, jpeg_bytes, wait_for_status


class JsonLines(logging.Handler):
    """Formats each record with the production formatter, in the thread that logged it."""

    def __init__(self) -> None:
        super().__init__(level=logging.INFO)
        self.setFormatter(JsonFormatter())
        self.lines: list[tuple[str, dict]] = []
        self._lock_lines = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        line = self.format(record)
        with self._lock_lines:
            self.lines.append((record.threadName, json.loads(line)))

    def about(self, attachment_id: str) -> list[tuple[str, dict]]:
        with self._lock_lines:
            return [(thread, doc) for thread, doc in self.lines if doc.get("attachment_id") == attachment_id]


@pytest.fixture
def json_lines(caplog):
    caplog.set_level(logging.INFO, logger="airlock")
    handler = JsonLines()
    logger = logging.getLogger("airlock")
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)


def _message(options: dict) -> dramatiq.Message:
    return dramatiq.Message(queue_name="intake", actor_name="intake", args=("x",), kwargs={}, options=options)


def test_middleware_sets_and_resets_the_request_id():
    middleware = RequestIdMiddleware()
    broker = StubBroker()
    outer = set_request_id(None)
    try:
        middleware.before_process_message(broker, _message({"request_id": "abc-123"}))
        assert current_request_id() == "abc-123"
        middleware.after_process_message(broker, _message({"request_id": "abc-123"}), exception=RuntimeError())
        assert current_request_id() is None
        middleware.before_process_message(broker, _message({}))
        assert current_request_id() is None
        middleware.after_skip_message(broker, _message({}))
        middleware.before_process_message(broker, _message({"request_id": "bad id with spaces"}))
        assert current_request_id() is None
        middleware.after_process_message(broker, _message({}))
        middleware.after_process_message(broker, _message({}))  # unbalanced: harmless
    finally:
        from attachments.request_id import reset_request_id

        reset_request_id(outer)


def test_the_configured_broker_runs_the_middleware():
    assert any(isinstance(m, RequestIdMiddleware) for m in dramatiq.get_broker().middleware)


@pytest.mark.django_db(transaction=True)
def test_worker_log_lines_carry_the_request_id_of_the_upload(alice, live_worker, json_lines, settings):
    settings.CLAMD_SOCKET = None  # YARA only: the log path, not the scanner, is under test
    settings.CLAMD_HOST = None
    client = client_for(alice)
    data = jpeg_bytes()
    intent = create_intent(client, size=len(data)).json()
    attachment_id = intent["id"]
    request_id = "req-" + uuid.uuid4().hex[:12]
    parts = urlsplit(intent["upload"]["url"])
    response = client_for().generic(
        "PUT",
        f"{parts.path}?{parts.query}",
        data,
        content_type="application/octet-stream",
        HTTP_X_REQUEST_ID=request_id,
    )
    assert response.status_code == 202, response.content
    assert response["X-Request-ID"] == request_id
    assert wait_for_status(attachment_id, timeout=60) == "ready"

    lines = json_lines.about(attachment_id)
    web = [doc for thread, doc in lines if doc["event"] == "object arrived"]
    assert web and web[0]["request_id"] == request_id and web[0]["tenant"] == "acme"

    worker = [(thread, doc) for thread, doc in lines if doc["event"] in ("step", "transition")]
    steps = {doc["step"]: doc for _thread, doc in worker if doc["event"] == "step"}
    assert set(steps) == {"intake", "derive"}  # intake runs the scan: its step line is intake's
    for thread, doc in worker:
        assert thread != threading.current_thread().name, "processed by a worker thread"
        assert doc.get("request_id") == request_id, json.dumps(doc)
        assert doc["tenant"] == "acme"
        assert isinstance(doc["duration_ms"], float)
        assert doc["outcome"]
    assert steps["derive"]["outcome"] == "ready"
    transitions = [doc for _thread, doc in worker if doc["event"] == "transition"]
    assert [(d["from_status"], d["outcome"]) for d in transitions] == [
        ("pending", "processing"),
        ("processing", "ready"),
    ]


def test_log_lines_are_single_json_objects_with_the_request_id():
    formatter = JsonFormatter()
    token = set_request_id("rid-1")
    try:
        record = logging.makeLogRecord(
            {
                "name": "airlock.pipeline",
                "levelno": logging.INFO,
                "levelname": "INFO",
                "msg": "step",
                "attachment_id": "a",
                "step": "scan",
                "outcome": "advanced",
                "duration_ms": 1.5,
                "tenant": "acme",
            }
        )
        line = formatter.format(record)
    finally:
        from attachments.request_id import reset_request_id

        reset_request_id(token)
    assert "\n" not in line
    doc = json.loads(line)
    assert doc["request_id"] == "rid-1"
    assert {k: doc[k] for k in ("attachment_id", "tenant", "step", "duration_ms", "outcome")} == {
        "attachment_id": "a",
        "tenant": "acme",
        "step": "scan",
        "duration_ms": 1.5,
        "outcome": "advanced",
    }
