"""BodyFirstMiddleware: small bodies read before the view (stalled: 408, ended: 400); large ones left alone."""

from __future__ import annotations

import io

import pytest
from django.http import HttpResponse
from django.test import RequestFactory

from ops.body_first import BodyFirstMiddleware


class _Stalled(io.RawIOBase):
    """gunicorn's body reader under a client that stopped sending: a read for the rest times out."""

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        raise TimeoutError("timed out")


def _seen_by_view(streams_body: bool = False):
    """(what the view saw, a callable running the middleware's view hook and then the view)."""
    seen: dict = {}

    class View:
        pass

    def view(request):
        seen["read_before_view"] = hasattr(request, "_body")
        return HttpResponse("ok")

    view.view_class = View  # type: ignore[attr-defined]
    if streams_body:
        View.streams_body = True  # type: ignore[attr-defined]
    middleware = BodyFirstMiddleware(view)

    def run(request):
        return middleware.process_view(request, view, (), {}) or view(request)

    return seen, run


def test_a_small_body_is_read_before_the_view():
    seen, middleware = _seen_by_view()
    request = RequestFactory().post("/api/v1/uploads", data=b'{"a": 1}', content_type="application/json")
    assert middleware(request).status_code == 200
    assert seen["read_before_view"] is True
    assert request.body == b'{"a": 1}'


class _Ended(io.RawIOBase):
    """gunicorn's body reader when the client closed the connection before Content-Length."""

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        from gunicorn.http.errors import NoMoreData

        raise NoMoreData(b"")


@pytest.mark.parametrize(
    "body, status, code", [(_Stalled, 408, b"REQUEST_TIMEOUT"), (_Ended, 400, b"VALIDATION_ERROR")]
)
def test_a_body_that_stalls_or_ends_early_is_answered_as_the_contract_says_and_the_view_never_runs(body, status, code):
    seen, middleware = _seen_by_view()
    request = RequestFactory().generic("POST", "/api/v1/uploads", content_type="application/json")
    request.META["CONTENT_LENGTH"] = "200"
    request._stream = body()
    response = middleware(request)
    assert response.status_code == status and code in response.content
    assert seen == {}


def test_a_view_that_streams_its_body_gets_it_unread():
    seen, middleware = _seen_by_view(streams_body=True)
    request = RequestFactory().post("/api/v1/tus/x", data=b"abc", content_type="application/offset+octet-stream")
    assert middleware(request).status_code == 200
    assert seen["read_before_view"] is False


def test_large_or_odd_lengths_are_left_to_the_view(settings):
    for length in (str(settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1), "-1", "9" * 5000, "²", ""):
        seen, middleware = _seen_by_view()
        request = RequestFactory().generic("PUT", "/api/v1/uploads/x/content", content_type="application/json")
        request.META["CONTENT_LENGTH"] = length
        assert middleware(request).status_code == 200
        assert seen["read_before_view"] is False, length
