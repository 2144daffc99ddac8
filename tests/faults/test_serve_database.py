"""`serve` on PostgreSQL: a bounded number of connections, and 503 (never 500) while the database is gone.

The server reaches PostgreSQL through a TCP proxy the test cuts: existing
connections drop and new ones are refused, as when the database restarts or
the network fails. It must answer 503 + Retry-After on every endpoint, and
recover by itself once the database is back.
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
import requests

from tests.support import jpeg_bytes
from tests.support.processes import Server

from .support import TcpProxy, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def _auth(token: str) -> dict:
    return {"Authorization": f"Token {token}"}


def _intent(server: Server, token: str, data: bytes) -> dict:
    response = requests.post(
        f"{server.base}/api/v1/uploads",
        headers=_auth(token),
        timeout=15,
        json={"profile": "image", "filename": "a.jpg", "size": len(data), "content_type": "image/jpeg"},
    )
    assert response.status_code == 201, response.text
    return response.json()


def _connections(server: Server) -> int:
    with psycopg.connect(server.admin_url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [server.dbname]).fetchone()[0]


def test_connections_stay_within_the_bound_under_load(tmp_path):
    pool_max, processes = 3, 2
    server = Server(tmp_path, {"AIRLOCK_DB_POOL": {"max": pool_max}, "AIRLOCK_SERVE": {"web_processes": processes}})
    try:
        assert server.dbname, "needs DATABASE_URL on PostgreSQL"
        tokens = [server.createuser(f"load{i}", "load") for i in range(4)]
        ids = [_intent(server, token, b"x" * 100)["id"] for token in tokens]
        # Each web process: its pool plus one LISTEN connection for `?wait=`; the job process: its pool.
        bound = processes * (pool_max + 1) + pool_max
        peak = [0]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], _connections(server))
                time.sleep(0.05)

        statuses: list[int] = []
        lock = threading.Lock()

        def client(n: int) -> None:
            token, own = tokens[n % 4], ids[n % 4]
            with requests.Session() as session:
                session.headers.update(_auth(token))
                for i in range(21):
                    if i % 3 == 0:
                        got = session.post(
                            f"{server.base}/api/v1/uploads",
                            timeout=30,
                            json={"profile": "image", "filename": "b.jpg", "size": 10, "content_type": "image/jpeg"},
                        )
                    elif i % 7 == 0:
                        got = session.get(f"{server.base}/api/v1/attachments/{own}?wait=0.5", timeout=30)
                    elif i % 3 == 1:
                        got = session.get(f"{server.base}/api/v1/attachments/{own}", timeout=30)
                    else:
                        got = session.get(f"{server.base}/api/v1/attachments?limit=5", timeout=30)
                    with lock:
                        statuses.append(got.status_code)

        sampler = threading.Thread(target=sample)
        sampler.start()
        threads = [threading.Thread(target=client, args=(n,)) for n in range(24)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
        time.sleep(1.0)
        done.set()
        sampler.join()
        assert len(statuses) >= 500
        assert not [s for s in statuses if s >= 500], sorted(set(statuses))
        assert peak[0] <= bound, f"{peak[0]} connections open, bound {bound}"
        assert _connections(server) <= bound
    finally:
        server.stop()


def _answers_after_retries(call, expected: int, seconds: float = 30.0) -> None:
    """`call()` answers `expected` within `seconds`, retried as a client honouring Retry-After retries a 503."""

    def answered() -> bool:
        got = call()
        if got.status_code != expected:
            assert got.status_code == 503 and int(got.headers["Retry-After"]) >= 1, (got.status_code, got.text[:300])
        return got.status_code == expected

    wait_until(answered, seconds, f"a {expected} after the database came back", interval=1.0)


def test_every_endpoint_answers_503_while_the_database_is_gone_and_recovers(tmp_path):
    import os

    host, port = "127.0.0.1", int(os.environ["DATABASE_URL"].rsplit(":", 1)[1].split("/", 1)[0])
    proxy = TcpProxy((host, port)).start()
    server = Server(tmp_path, {"AIRLOCK_DB_POOL": {"timeout_seconds": 2}}, db_port=proxy.port)
    try:
        token = server.createuser("outage", "outage")
        data = jpeg_bytes((64, 48))
        ready = _intent(server, token, data)
        assert (
            requests.put(ready["upload"]["url"], data=data, headers=ready["upload"]["headers"], timeout=30).status_code
            == 202
        )
        pending = _intent(server, token, data)
        auth = _auth(token)
        base, rid, pid = server.base, ready["id"], pending["id"]
        # The profiles need no database (the token may be in the auth cache): 200 or 503, never 500.
        calls = [
            (
                "POST",
                "/api/v1/uploads",
                {"json": {"profile": "image", "filename": "c.jpg", "size": 10, "content_type": "image/jpeg"}},
            ),
            ("GET", "/api/v1/attachments", {}),
            ("GET", f"/api/v1/attachments/{rid}", {}),
            ("GET", f"/api/v1/attachments/{pid}?wait=1", {}),
            ("GET", f"/api/v1/attachments/{rid}/download", {}),
            ("GET", f"/api/v1/attachments/{rid}/thumbnail", {}),
            ("POST", "/api/v1/attachments/heartbeat", {"json": {"ids": [pid]}}),
            ("POST", "/api/v1/attachments/commit", {"json": {"ids": [rid], "ref": "x"}}),
            ("POST", f"/api/v1/attachments/{pid}/discard", {}),
            ("POST", "/api/v1/attachments/discard-all", {}),
            ("GET", "/api/v1/search?q=word", {}),
            ("POST", f"/api/v1/uploads/{pid}/complete", {}),
            (
                "POST",
                "/api/v1/attachments",
                {"files": {"file": ("d.jpg", data, "image/jpeg")}, "data": {"profile": "image"}},
            ),
        ]
        proxy.cut()
        profiles = requests.get(f"{base}/api/v1/profiles", headers=auth, timeout=30)
        assert profiles.status_code in (200, 503), profiles.status_code
        for method, path, kwargs in calls:
            got = requests.request(method, base + path, headers=auth, timeout=30, **kwargs)
            assert got.status_code == 503, (method, path, got.status_code, got.text[:300])
            assert got.json()["error"]["code"] == "UNAVAILABLE" and int(got.headers["Retry-After"]) >= 1, path
        put = requests.put(pending["upload"]["url"], data=data, headers=pending["upload"]["headers"], timeout=30)
        assert put.status_code == 503 and put.headers.get("Retry-After"), (put.status_code, put.text[:300])
        assert requests.get(f"{base}/readyz", timeout=30).status_code == 503
        assert requests.get(f"{base}/admin/login/", timeout=30).status_code != 500

        proxy.start()  # the database is back: nobody restarts anything
        wait_until(
            lambda: requests.get(f"{base}/api/v1/attachments/{rid}", headers=auth, timeout=30).ok,
            30,
            "the API to answer again",
        )
        # A loaded machine may still be re-opening the pool's connections: a client that honours
        # Retry-After gets through, and nothing answers 500 meanwhile.
        _answers_after_retries(
            lambda: requests.put(pending["upload"]["url"], data=data, headers=pending["upload"]["headers"], timeout=30),
            202,
        )  # the failed PUT did not use the URL up
        _answers_after_retries(
            lambda: requests.post(
                f"{base}/api/v1/uploads",
                headers=auth,
                timeout=30,
                json={"profile": "image", "filename": "e.jpg", "size": 10, "content_type": "image/jpeg"},
            ),
            201,
        )
    finally:
        server.stop()
        proxy.cut()
