"""One place that sends requests: retries with backoff on 429/503/423 (honouring Retry-After) and on lost
connections."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import httpx

from .errors import AirlockError, StorageError, TransportError, error_from_response, retry_after_seconds
from .redact import safe_url, scrub

RETRY_STATUSES = frozenset({423, 429, 503})


class Sender:
    def __init__(
        self,
        http: httpx.Client,
        *,
        max_retries: int,
        backoff: float,
        max_backoff: float,
        sleep: Callable[[float], None],
        errors: Callable[[httpx.Response], AirlockError] = error_from_response,
        outage_budget: float = 60.0,
    ) -> None:
        self.http = http
        self.errors = errors  # the typed error for an answer outside `ok`
        self.max_retries = max_retries
        self.outage_budget = outage_budget
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.sleep = sleep

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Exponential backoff, never shorter than the server's Retry-After, plus up to 20 % jitter.

        The jitter only lengthens the wait, so clients told the same Retry-After spread out
        after it instead of all coming back at that very second.
        """
        backoff = min(self.max_backoff, self.backoff * (2**attempt))
        return float(max(retry_after or 0.0, backoff) * random.uniform(1.0, 1.2))

    def send(
        self,
        method: str,
        url: str,
        *,
        ok: tuple[int, ...] = (200, 201, 202, 204),
        reconnect: bool = False,
        **kwargs: Any,
    ) -> httpx.Response:
        """Send until an answer in `ok` (returned) or an error (raised, typed).

        429, 503 and 423 are always retried (the server created nothing and said
        when to come back), and so is a connection that could not be opened (the
        request never left); a connection lost later only when `reconnect` says
        the request is safe to repeat. Retries go on for `max_retries` tries or
        until `outage_budget` seconds were waited, whichever is longer: a server
        or bucket that is away for a minute is waited out. A body given as a
        callable is rebuilt per attempt.
        """
        content = kwargs.pop("content", None)
        attempt = 0
        waited = 0.0
        while True:
            body = content() if callable(content) else content
            try:
                response = self.http.request(method, url, content=body, **kwargs)
            except httpx.TransportError as exc:
                unsent = isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))
                if not (reconnect or unsent) or not self._may_retry(attempt, waited):
                    raise TransportError(f"{method} {safe_url(url)}: {scrub(exc)!r}") from exc
                waited += self._pause(attempt, None)
                attempt += 1
                continue
            if response.status_code in ok:
                return response
            if response.status_code in RETRY_STATUSES and self._may_retry(attempt, waited):
                waited += self._pause(attempt, retry_after_seconds(response))
                attempt += 1
                continue
            raise self.errors(response)

    def _may_retry(self, attempt: int, waited: float) -> bool:
        return attempt < self.max_retries or waited < self.outage_budget

    def _pause(self, attempt: int, retry_after: float | None) -> float:
        pause = self.delay(attempt, retry_after)
        self.sleep(pause)
        return pause


def storage_error_from_response(response: httpx.Response) -> AirlockError:
    """The error for a refused signed or presigned request: Airlock's own (JSON) or the bucket's (XML)."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return error_from_response(response)
    text = response.text
    code = _xml_tag(text, "Code") or f"HTTP_{response.status_code}"
    return StorageError(
        _xml_tag(text, "Message") or text[:200],
        code=code,
        status=response.status_code,
        retry_after=retry_after_seconds(response),
    )


def _xml_tag(text: str, tag: str) -> str | None:
    start = text.find(f"<{tag}>")
    end = text.find(f"</{tag}>")
    return text[start + len(tag) + 2 : end] if 0 <= start < end else None
