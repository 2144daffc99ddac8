"""A small bounded load generator (threads + http.client keep-alive), used when wrk is not installed."""

from __future__ import annotations

import http.client
import threading
import time
from urllib.parse import urlsplit


def run(
    url: str,
    *,
    method: str = "GET",
    bodies: list[bytes] | None = None,
    headers_list: list[dict] | None = None,
    paths: list[str] | None = None,
    connections: int = 8,
    seconds: float = 3.0,
    max_requests: int = 200_000,
) -> dict:
    """Hammer url (or the rotating paths) for `seconds`; bounded by time and by max_requests."""
    parts = urlsplit(url)
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    deadline = time.monotonic() + seconds
    counter = [0]

    def worker(n: int) -> None:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        local: list[float] = []
        i = n
        while time.monotonic() < deadline:
            with lock:
                if counter[0] >= max_requests:
                    break
                counter[0] += 1
            path = paths[i % len(paths)] if paths else parts.path
            body = bodies[i % len(bodies)] if bodies else None
            headers = dict(headers_list[i % len(headers_list)]) if headers_list else {}
            start = time.perf_counter()
            try:
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                response.read()
                if response.status >= 400:
                    with lock:
                        errors[0] += 1
            except (OSError, http.client.HTTPException):
                with lock:
                    errors[0] += 1
                conn.close()
                conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
            local.append(time.perf_counter() - start)
            i += connections
        conn.close()
        with lock:
            latencies.extend(local)

    started = time.monotonic()
    threads = [threading.Thread(target=worker, args=(n,)) for n in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 60)
    elapsed = time.monotonic() - started
    latencies.sort()
    p99 = latencies[max(0, int(len(latencies) * 0.99) - 1)] if latencies else None
    return {
        "rps": len(latencies) / elapsed,
        "p99_ms": None if p99 is None else p99 * 1000,
        "requests": len(latencies),
        "errors": errors[0],
        "tool": "python http.client threads",
    }
