"""How long the current request may still wait for a database connection.

A request's deadline runs from Django's request_started signal; the pool
(base.py) lets a request queue for a busy connection until then. Outside a
request (jobs, commands) there is no deadline.
"""

from __future__ import annotations

import threading
import time

from django.core.signals import request_finished, request_started

_current = threading.local()


def _started(sender: object, **kwargs: object) -> None:
    _current.since = time.monotonic()


def _finished(sender: object, **kwargs: object) -> None:
    _current.since = None


def seconds_left(deadline: float) -> float | None:
    """Seconds until this thread's request is `deadline` seconds old; None outside a request."""
    since = getattr(_current, "since", None)
    if since is None:
        return None
    return deadline - (time.monotonic() - since)


request_started.connect(_started, dispatch_uid="airlock-request-deadline-start")
request_finished.connect(_finished, dispatch_uid="airlock-request-deadline-finish")
