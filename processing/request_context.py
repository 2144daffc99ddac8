"""Carry the web request's id into the jobs it enqueued.

The outbox stores ``current_request_id()`` with each job and the relay sends
it as the Dramatiq message option ``request_id``. This middleware sets the
logging context variable from that option while the worker thread processes
the message, so every log line of the job carries the same ``request_id`` as
the request that caused it, and resets it afterwards so the next message on
the same thread does not inherit it.
"""

from __future__ import annotations

import contextvars
import threading

import dramatiq
from dramatiq.broker import MessageProxy
from dramatiq.middleware import Middleware

from attachments.request_id import reset_request_id, set_request_id

_MAX_LENGTH = 64


def _clean(value: object) -> str | None:
    if not isinstance(value, str) or not value or len(value) > _MAX_LENGTH:
        return None
    return value if value.replace("-", "").isalnum() else None


class RequestIdMiddleware(Middleware):
    """Set the request-id context variable from ``message.options["request_id"]`` around each job."""

    def __init__(self) -> None:
        self._local = threading.local()

    def _stack(self) -> list[contextvars.Token]:
        stack = getattr(self._local, "tokens", None)
        if stack is None:
            stack = self._local.tokens = []
        return stack

    def before_process_message(self, broker: dramatiq.Broker, message: MessageProxy) -> None:
        self._stack().append(set_request_id(_clean(message.options.get("request_id"))))

    def _reset(self) -> None:
        stack = self._stack()
        if stack:
            token = stack.pop()
            try:
                reset_request_id(token)
            except ValueError:  # created in another context: clear rather than leak
                set_request_id(None)

    def after_process_message(
        self,
        broker: dramatiq.Broker,
        message: MessageProxy,
        *,
        result: object = None,
        exception: BaseException | None = None,
    ) -> None:
        self._reset()

    def after_skip_message(self, broker: dramatiq.Broker, message: MessageProxy) -> None:
        self._reset()
