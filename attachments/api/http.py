"""What every HTTP answer and request of the API shares: the error body's shape, the declared body length.

Its own module so that the error handlers (errors.py, outages.py) and the
middleware in ops/ read them without importing the views.
"""

from __future__ import annotations

from django.http import HttpRequest

from ..errors import ValidationFailed


def error_body(code: str, message: str, details: dict | None = None) -> dict:
    return {"error": {"code": code, "message": message, "details": details or {}}}


def content_length(request: HttpRequest) -> int | None:
    """The declared body length; None when absent. A negative or non-numeric one is a 400."""
    raw = request.META.get("CONTENT_LENGTH")
    if raw in (None, ""):
        return None
    if not (raw.isascii() and raw.isdigit()):
        raise ValidationFailed(
            "Content-Length must be a non-negative integer.", details={"Content-Length": ["A non-negative integer."]}
        )
    return int(raw) if len(raw) <= 18 else 10**18  # larger than any limit; int() refuses > 4300 digits
