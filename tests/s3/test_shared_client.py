"""Every thread of a process uses one boto3 client.

django-storages' connection is per thread: a boto3 session and resource on a
thread's first S3 call, 100-240 ms of CPU each. In a burst of 200 uploads every
request thread of a web process paid it (tests/e2e/test_burst_s3.py).
"""

from __future__ import annotations

import threading

import pytest

pytestmark = [pytest.mark.s3]


def test_threads_share_the_gateways_client_and_use_it_concurrently(s3):
    from attachments.storage import get_gateway

    s3.put("tenants/acme/image/a/original", b"hello")
    gateway = get_gateway()
    clients: list[object] = []
    sizes: list[int | None] = []
    lock = threading.Lock()

    def work() -> None:
        client = gateway.client
        info = gateway.head("tenants/acme/image/a/original")
        with lock:
            clients.append(client)
            sizes.append(info.size if info else None)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(clients) == 8 and all(client is gateway.client for client in clients)
    assert sizes == [5] * 8
