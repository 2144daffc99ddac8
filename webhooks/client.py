"""One webhook POST to an address urlguard checked: no redirects, no retries here, a hard timeout.

Connections go to the checked IP address, while the Host header and the TLS
server name (SNI and certificate check) stay the URL's host name. Pools are kept
per (scheme, address, port, host) so a burst to one receiver reuses connections.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import urllib3
from urllib3.exceptions import HTTPError

from .urlguard import Target

SNIPPET_BYTES = 500
# What is read of a response at most; the rest is dropped with the connection.
READ_LIMIT = 64 * 1024
USER_AGENT = "Airlock-Webhooks/1"


class TransportError(Exception):
    """No HTTP answer: connection refused or reset, TLS failure, timeout."""


@dataclass(frozen=True)
class Answer:
    status: int
    snippet: str
    retry_after: float | None


_pools: dict[tuple[str, str, int, str], urllib3.HTTPConnectionPool] = {}
_pools_lock = threading.Lock()


def _pool(target: Target, address: str) -> urllib3.HTTPConnectionPool:
    key = (target.scheme, address, target.port, target.host)
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None:
            if len(_pools) > 200:  # many endpoints over time: start over rather than grow forever
                for old in _pools.values():
                    old.close()
                _pools.clear()
            if target.scheme == "https":
                pool = urllib3.HTTPSConnectionPool(
                    address,
                    target.port,
                    server_hostname=target.host,
                    assert_hostname=target.host,
                    cert_reqs="CERT_REQUIRED",
                    maxsize=16,
                    block=False,
                    retries=False,
                )
            else:
                pool = urllib3.HTTPConnectionPool(address, target.port, maxsize=16, block=False, retries=False)
            _pools[key] = pool
    return pool


def _retry_after(value: str | None) -> float | None:
    """Seconds from `Retry-After`: delay-seconds or an HTTP date (RFC 9110); None when it is neither."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT; a receiver that leaves the zone out means it too
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def post(target: Target, *, body: bytes, headers: dict[str, str], timeout: float) -> Answer:
    """POST `body` to the first checked address of `target`; TransportError if nothing answered."""
    request_headers = {
        "Host": target.host_header,
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        **headers,
    }
    last: Exception | None = None
    # One address after another only when connecting fails (a name with A and AAAA records).
    for address in target.addresses[:3]:
        pool = _pool(target, address)
        try:
            response = pool.urlopen(
                "POST",
                target.path,
                body=body,
                headers=request_headers,
                redirect=False,
                retries=False,
                timeout=urllib3.Timeout(total=timeout),
                preload_content=False,
                assert_same_host=False,
            )
        except urllib3.exceptions.NewConnectionError as exc:
            last = exc
            continue
        except (HTTPError, OSError) as exc:
            raise TransportError(_describe(exc)) from None
        try:
            data = response.read(READ_LIMIT)
            complete = not response.read(1)
        except (HTTPError, OSError) as exc:
            response.close()
            raise TransportError(_describe(exc)) from None
        if complete:
            response.release_conn()
        else:
            response.close()
        return Answer(
            status=response.status,
            snippet=data[:SNIPPET_BYTES].decode("utf-8", "replace"),
            retry_after=_retry_after(response.headers.get("Retry-After")),
        )
    raise TransportError(_describe(last) if last else "no address to connect to")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, (urllib3.exceptions.TimeoutError, TimeoutError)):
        return "timeout"
    text = str(exc)
    # urllib3 messages repeat the pool's repr; the reason is after the last colon.
    return (text.rsplit(": ", 1)[-1] or type(exc).__name__)[:300]
