"""20 intents at once with one client token whose budget is 5 files: exactly 5 are created.

20 threads, each with its own database connection (PostgreSQL in scripts/test,
SQLite in --embedded), released together by a barrier, as tests/quotas/test_race.py.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from django.db import connection
from rest_framework.test import APIClient

from attachments.client_tokens.services.client_tokens import client_token_issue
from attachments.models import Attachment, ClientToken
from tests.support import create_intent

CLIENTS = 20


def _race(send) -> list[tuple[int, dict]]:
    barrier = threading.Barrier(CLIENTS)

    def one(i: int) -> tuple[int, dict]:
        barrier.wait(timeout=30)
        try:
            return send(i)
        finally:
            connection.close()  # each thread's own connection

    with ThreadPoolExecutor(CLIENTS) as pool:
        return list(pool.map(one, range(CLIENTS)))


def test_twenty_concurrent_intents_cannot_pass_max_files(transactional_db, make_user):
    host = make_user("host", tenant="race")
    issued = client_token_issue(user=host, subject="guest-1", ttl_seconds=600, max_files=5, max_bytes=10_000)
    clients = []
    for _ in range(CLIENTS):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.key}")
        clients.append(client)

    def send(i: int) -> tuple[int, dict]:
        response = create_intent(clients[i], size=100)
        return response.status_code, response.json()

    results = _race(send)
    statuses = sorted(status for status, _ in results)
    assert statuses == [201] * 5 + [413] * (CLIENTS - 5), statuses
    for status, body in results:
        if status == 413:
            assert body["error"]["details"]["quota"] == "client_token_files"
    assert Attachment.objects.filter(subject="guest-1").count() == 5
    row = ClientToken.objects.get(pk=issued.token.pk)
    assert (row.files_used, row.bytes_used) == (5, 500)
