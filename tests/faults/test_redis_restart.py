"""Redis killed and started again empty mid-burst, in the production topology: every file ready within a minute.

`serve --no-worker` (web + scheduler) and `rundramatiq --processes 2` on
PostgreSQL, clamd and a Redis of this test's own. Killing that Redis loses
every queued job, parked job, tenant slot and worker beat; the database still
holds the files. The scheduler notices the loss (the broker's epoch key is
gone: processing/broker_epoch.py) and re-drives every file whose bytes arrived
from the database, without waiting for the slow fallback re-drive (900 s with
the default settings). Meanwhile nothing is served before `ready`, and another
tenant's uploads are accepted.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from tests.support import jpeg_bytes
from tests.support.processes import PrivateRedis, Server

from .test_worker_kill_recovery import Workers, _statuses, _story

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis, pytest.mark.clamd]

FILES = 30  # half queued in Redis when it dies, half uploaded after
RECOVERY_SECONDS = 60


def _upload(base: str, token: str, data: bytes, name: str, *, patient: bool = True) -> str:
    """Upload one file; while Redis is away the API may answer 503 (Retry-After), which a client retries."""
    auth = {"Authorization": f"Token {token}"}
    deadline = time.monotonic() + (30 if patient else 0)
    while True:
        intent = requests.post(
            f"{base}/api/v1/uploads",
            headers=auth,
            timeout=60,
            json={"profile": "image", "filename": name, "size": len(data), "content_type": "image/jpeg"},
        )
        if intent.status_code == 201 or time.monotonic() > deadline:
            break
        assert intent.status_code == 503 and intent.headers.get("Retry-After"), (intent.status_code, intent.text)
        time.sleep(0.5)
    assert intent.status_code == 201, intent.text
    upload = intent.json()["upload"]
    while True:
        sent = requests.put(upload["url"], data=data, headers=upload["headers"], timeout=120)
        if sent.status_code in (200, 201, 202, 204) or time.monotonic() > deadline:
            break
        assert sent.status_code == 503, (sent.status_code, sent.text)
        time.sleep(0.5)
    assert sent.status_code in (200, 201, 202, 204), sent.text
    return intent.json()["id"]


def _assert_not_served(server: Server, token: str, ids: list[str], statuses: dict[str, str]) -> None:
    """A file that was not ready is not served, unless it became ready in between (then it is ready now)."""
    for attachment_id in ids:
        if statuses.get(attachment_id) != "ready":
            response = requests.get(
                f"{server.base}/api/v1/attachments/{attachment_id}/download",
                headers={"Authorization": f"Token {token}"},
                timeout=30,
                allow_redirects=False,
            )
            if response.status_code == 200:
                assert _statuses(server, [attachment_id])[attachment_id] == "ready", attachment_id
            else:
                assert response.status_code in (404, 503), (attachment_id, response.status_code)


@pytest.fixture
def redis_of_our_own():
    redis = PrivateRedis()
    redis.start()
    try:
        yield redis
    finally:
        redis.kill()


def test_every_file_is_ready_within_a_minute_after_redis_restarts_empty(redis_of_our_own, tmp_path):
    socket_path = os.environ.get("CLAMD_SOCKET")
    assert socket_path, "needs clamd (scripts/test sets CLAMD_SOCKET)"
    server = Server(
        tmp_path,
        {
            "REDIS_URL": redis_of_our_own.url,
            "AIRLOCK_SERVE": {"tick_seconds": 2},
            "CLAMD_SOCKET": socket_path,
            "AIRLOCK_LOG_LEVEL": "WARNING",
        },
        args=("--no-worker",),
    )
    assert server.dbname, "the production topology runs on PostgreSQL (scripts/test sets DATABASE_URL)"
    workers = None
    try:
        token = server.createuser("guest", "wedding")
        peer = server.createuser("peer", "wedding")
        other = server.createuser("neighbour", "bakery")
        # The first half is uploaded before any worker runs: their jobs wait in Redis, and are lost with it.
        photos = [jpeg_bytes((800, 600), color=(i * 7 % 256, 60, 200)) for i in range(FILES)]
        ids = [_upload(server.base, token, data, f"q{i}.jpg") for i, data in enumerate(photos[: FILES // 2])]
        redis_of_our_own.kill()
        time.sleep(1.0)
        redis_of_our_own.start()
        back = time.monotonic()
        workers = Workers(server, tmp_path / "workers.log")
        with ThreadPoolExecutor(max_workers=4) as pool:
            rest = photos[FILES // 2 :]
            ids += list(pool.map(lambda i: _upload(server.base, token, rest[i], f"p{i}.jpg"), range(len(rest))))

        time.sleep(2.0)
        neighbour = _upload(server.base, other, jpeg_bytes((120, 90)), "n.jpg", patient=False)
        ids.append(neighbour)
        deadline = back + RECOVERY_SECONDS
        statuses: dict[str, str] = {}
        while time.monotonic() < deadline:
            statuses = _statuses(server, ids)
            if set(statuses.values()) == {"ready"}:
                break
            _assert_not_served(server, peer, ids[:5], statuses)
            time.sleep(0.5)
        took = time.monotonic() - back
        late = {pk: s for pk, s in statuses.items() if s != "ready"}
        story = _story(server, ids)
        print(f"all ready {took:.1f} s after Redis came back; {story}")
        assert not late, f"{len(late)} files not ready {RECOVERY_SECONDS} s after Redis came back: {late}; {story}"
        assert "the broker lost its state" in server.log_path.read_text(), "the scheduler did not notice the loss"
    finally:
        if workers is not None:
            workers.stop()
        server.stop()
