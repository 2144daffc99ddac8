"""No credential reaches a log line: upload tokens in URLs, Authorization headers, presigned signatures."""

from __future__ import annotations

import io
import logging

import pytest

from ops.logging import JsonFormatter
from tests.support import create_intent, jpeg_bytes, put_bytes


@pytest.fixture
def log_lines():
    """What the configured JSON handler would print, for every logger."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield stream
    finally:
        root.removeHandler(handler)


def _format(msg: str, *args, **extra) -> str:
    record = logging.LogRecord("t", logging.WARNING, __file__, 1, msg, args, None)
    record.__dict__.update(extra)
    return JsonFormatter().format(record)


@pytest.mark.parametrize(
    ("msg", "args", "extra", "secret"),
    [
        ('"PUT /api/v1/uploads/1/content?token=%s HTTP/1.1" 403 1', ("abc:1x:SIGNATURE",), {}, "SIGNATURE"),
        ("headers %s", ({"HTTP_AUTHORIZATION": "Token 0123456789abcdef"},), {}, "0123456789abcdef"),
        ("headers", (), {"headers": {"Authorization": "Bearer events-secret"}}, "events-secret"),
        (
            "redirect",
            (),
            {"location": "https://s3/x?X-Amz-Signature=deadbeef99&X-Amz-Credential=AKIAXYZ"},
            "deadbeef99",
        ),
        ("boom", (), {"url": "http://h/u?a=1&token=tok-secret#frag"}, "tok-secret"),
    ],
)
def test_credentials_are_redacted_wherever_they_appear(msg, args, extra, secret):
    line = _format(msg, *args, **extra)
    assert secret not in line and "[redacted]" in line


def test_refused_upload_is_logged_without_its_token_and_the_url_stays_valid(alice, api, log_lines):
    client = api(alice)
    data = jpeg_bytes()
    url = create_intent(client, size=len(data)).json()["upload"]["url"]
    token = url.split("token=", 1)[1]
    # Refused: the body is over the declared size (django.request logs the 413 with the request).
    too_big = put_bytes(url, data + b"x" * 100)
    assert too_big.status_code == 413
    other = create_intent(client, size=len(data)).json()["upload"]["url"]
    forged = other.split("?", 1)[0] + "?token=" + token  # a token for another intent: 403
    assert put_bytes(forged, data).status_code == 403

    output = log_lines.getvalue()
    assert "uploads" in output  # django.request did log both refusals
    assert token not in output and token.split(":")[-1] not in output
    # A refused attempt does not use the URL up.
    assert put_bytes(url, data).status_code == 202
