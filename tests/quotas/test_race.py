"""20 intents at once for the last room: exactly one wins, in-process threads and over HTTP against `serve`.

In-process: 20 threads, each with its own database connection (PostgreSQL in
scripts/test, SQLite in --embedded), released together by a barrier. Over HTTP:
`manage.py serve` in a subprocess and 20 client threads (tests/e2e's Server).
"""

from __future__ import annotations

import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from django.db import connection

from attachments.models import Attachment, Tenant, TenantUsage
from attachments.services.quotas import usage_recounted
from tests.support import client_for, create_intent

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = 20
SIZE = 1000
# AIRLOCK_TENANT_QUOTA's key → (the limit, how much to fill first): one intent of SIZE bytes fits, no more.
QUOTAS = {
    "bytes": (10 * SIZE, [9 * SIZE]),
    "files": (4, [SIZE, SIZE, SIZE]),
}


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


def _check(results: list[tuple[int, dict]], quota: str, limit: int) -> None:
    statuses = sorted(status for status, _ in results)
    assert statuses == [201] + [413] * (CLIENTS - 1), statuses
    for status, body in results:
        if status == 413:
            details = body["error"]["details"]
            assert body["error"]["code"] == "QUOTA_EXCEEDED" and details["quota"] == quota
            assert details["used"] == limit and details["limit"] == limit


@pytest.mark.parametrize("quota", sorted(QUOTAS))
def test_twenty_threads_race_for_the_last_room(transactional_db, make_user, settings, quota):
    limit, fill = QUOTAS[quota]
    users = [make_user(f"racer-{i}", tenant="race") for i in range(CLIENTS)]
    for size in fill:
        assert create_intent(client_for(users[0]), size=size).status_code == 201
    settings.AIRLOCK_TENANT_QUOTA = settings.AIRLOCK_TENANT_QUOTA.replace(**{quota: limit})
    clients = [client_for(user) for user in users]

    def send(i: int) -> tuple[int, dict]:
        response = create_intent(clients[i], size=SIZE)
        return response.status_code, response.json()

    _check(_race(send), quota, limit)
    tenant = Tenant.objects.get(slug="race")
    assert Attachment.objects.filter(tenant=tenant).count() == len(fill) + 1
    row = TenantUsage.objects.get(tenant=tenant)
    assert (row.bytes_used, row.files_used) == usage_recounted(tenant.pk) == (sum(fill) + SIZE, len(fill) + 1)


def _createusers(server, n: int) -> list[str]:
    """n users of tenant "race" through createuser, in one process (a process per user costs seconds each)."""
    script = (
        "import io\nfrom django.core.management import call_command\n"
        f"for i in range({n}):\n"
        "    out = io.StringIO()\n"
        "    call_command('createuser', f'racer{i}', '--tenant', 'race', stdout=out)\n"
        "    print(out.getvalue().strip().splitlines()[-1])\n"
    )
    out = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", script],
        cwd=ROOT,
        env=server.env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    tokens = out.strip().splitlines()[-n:]  # after the shell's own banner
    assert len(tokens) == n and all(len(t) == 40 for t in tokens), out
    return tokens


@pytest.mark.slow
@pytest.mark.parametrize("quota", sorted(QUOTAS))
def test_twenty_http_clients_race_against_serve(tmp_path, quota):
    from tests.support.processes import Server

    limit, fill = QUOTAS[quota]
    server = Server(
        tmp_path, {"AIRLOCK_TENANT_QUOTA": f"{quota}={limit}", "AIRLOCK_RATE_LIMITS": "intents_per_minute=1000"}
    )
    try:
        tokens = _createusers(server, CLIENTS)
        base = server.base

        def intent(token: str) -> requests.Response:
            return requests.post(
                f"{base}/api/v1/uploads",
                headers={"Authorization": f"Token {token}"},
                timeout=30,
                json={"profile": "image", "filename": "r.jpg", "size": SIZE, "content_type": "image/jpeg"},
            )

        for size in fill:
            response = requests.post(
                f"{base}/api/v1/uploads",
                headers={"Authorization": f"Token {tokens[0]}"},
                timeout=30,
                json={"profile": "image", "filename": "f.jpg", "size": size, "content_type": "image/jpeg"},
            )
            assert response.status_code == 201, response.text
        sessions = [requests.Session() for _ in range(CLIENTS)]

        def send(i: int) -> tuple[int, dict]:
            response = sessions[i].post(
                f"{base}/api/v1/uploads",
                headers={"Authorization": f"Token {tokens[i]}"},
                timeout=60,
                json={"profile": "image", "filename": "r.jpg", "size": SIZE, "content_type": "image/jpeg"},
            )
            return response.status_code, response.json()

        _check(_race(send), quota, limit)
        used = requests.get(f"{base}/api/v1/usage", headers={"Authorization": f"Token {tokens[1]}"}, timeout=10).json()
        assert used["files_used"] == len(fill) + 1 and used["bytes_used"] == sum(fill) + SIZE
        assert (used["bytes_limit"] if quota == "bytes" else used["files_limit"]) == limit
        assert intent(tokens[2]).status_code == 413  # and it stays full
    finally:
        server.stop()
