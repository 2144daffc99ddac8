"""gunicorn's own logs (errors, and access lines when enabled) as the app's JSON lines, credentials redacted.

gunicorn installs its own handlers with its own text format by default, past
the app's JsonFormatter and its redactor: a refused request's line ("Invalid
request from ip=…: <the request line>") went out with a signed URL's query
string in it. Here its two loggers keep no handler of their own and propagate
to the root logger configured by Django's LOGGING (ops.logging.JsonFormatter).
An access line carries the path only, never the query string: signed URLs
carry their signature and upload tokens there.
"""

from __future__ import annotations

import logging
from typing import Any

from gunicorn import glogging


class ServerLogger(glogging.Logger):
    """gunicorn's logger class for `serve` (ops/httpserver.py options: logger_class)."""

    def setup(self, cfg: Any) -> None:
        self.cfg = cfg
        self._access_log_enabled = bool(cfg.accesslog)
        self.loglevel = self.LOG_LEVELS.get(cfg.loglevel.lower(), logging.INFO)
        self.error_log.setLevel(self.loglevel)
        self.access_log.setLevel(logging.INFO)
        for log in (self.error_log, self.access_log):
            for handler in list(log.handlers):
                log.removeHandler(handler)
            log.propagate = True

    def access(self, resp: Any, req: Any, environ: dict, request_time: Any) -> None:
        if not self.access_log_enabled:
            return
        seconds = request_time.seconds + request_time.microseconds / 1e6
        self.access_log.info(
            "request",
            extra={
                "method": environ.get("REQUEST_METHOD", ""),
                "path": environ.get("PATH_INFO", ""),
                "status": getattr(resp, "status_code", None) or str(getattr(resp, "status", "")).split(" ", 1)[0],
                "bytes": getattr(resp, "sent", None),
                "duration_ms": round(seconds * 1000, 1),
                "remote_addr": environ.get("REMOTE_ADDR", ""),
            },
        )
