"""Three outcome families: permanent (a content decision), transient (retry), clean stop."""

from __future__ import annotations


class ContentRejected(Exception):
    """The bytes are the problem: reject, never retry."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(f"{code}: {message}")


class TransientError(Exception):
    """Infrastructure hiccup (storage, database, scanner, broker): retry with backoff."""


class StaleJob(Exception):
    """This job lost: the row moved on (duplicate message, newer attempt). Not an error."""
