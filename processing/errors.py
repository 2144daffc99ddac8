"""Two outcome families raised by steps: permanent (a content decision) and transient (retry)."""

from __future__ import annotations


class ContentRejected(Exception):
    """The bytes are the problem: reject, never retry."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(f"{code}: {message}")


class TransientError(Exception):
    """Infrastructure hiccup (storage, database, scanner, broker): retry with backoff."""
