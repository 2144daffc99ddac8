"""`?wait=` waiters sleep until their attachments change: no polling, no connection held, capped without failing.

Past a waiter cap a wait is skipped (200 with the current state and an
`Airlock-Wait: skipped` header), never refused; the list's `?ids=…&wait=`
follows many files with one waiter.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from attachments import waiting
from attachments.models import Attachment
from attachments.services.moderation import attachment_take_down
from attachments.services.processing import attachment_begin
from tests.support import create_intent

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _changes_are_heard(monkeypatch):
    # As in serve's embedded shape or with Redis/PostgreSQL: no safety re-reads.
    monkeypatch.setattr(waiting, "RECHECK_SECONDS", 3600)


def _reader(log: list):
    def read():
        # A sleeping waiter gave its connection back (to the pool, or closed it).
        log.append(connection.connection is None)
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return len(log)

    return read


def test_a_waiter_reads_twice_over_its_whole_wait_and_holds_no_connection_meanwhile():
    reads: list[bool] = []
    started = time.monotonic()
    waiting.wait_until(user_id=1, attachment_ids=["a"], seconds=1.5, read=_reader(reads), settled=lambda v: False)
    assert time.monotonic() - started >= 1.4
    # Once on arrival, once at the deadline; polling every 100 ms would be 15.
    assert len(reads) == 2 and all(reads[1:]), reads


@pytest.mark.redis
def test_the_listener_subscribing_costs_the_first_waiters_no_extra_read():
    # A fresh process: its first waiters start the listener. Its wake-up on connect
    # (for changes missed while connecting) must not cost them a second read each.
    waiting.stop_listener()
    if waiting._listener is not None:
        waiting._listener.join(5)
    assert waiting.feed() == "redis"
    logs: list[list[bool]] = [[] for _ in range(5)]

    def wait(i: int, log: list[bool]) -> None:
        try:
            waiting.wait_until(
                user_id=i, attachment_ids=[f"g{i}"], seconds=1.0, read=_reader(log), settled=lambda v: False
            )
        finally:
            connection.close()  # back to the pool: a thread that dies holding one leaks it

    threads = [threading.Thread(target=wait, args=(i, log)) for i, log in enumerate(logs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert [len(log) for log in logs] == [2] * 5


def test_a_change_wakes_the_waiter_at_once():
    reads: list[bool] = []
    threading.Timer(0.3, waiting.hub.wake, args=("b",)).start()
    started = time.monotonic()
    waited = waiting.wait_until(
        user_id=1, attachment_ids=["b"], seconds=10, read=_reader(reads), settled=lambda v: v >= 2
    )
    assert waited.value == 2 and waited.skipped is None and time.monotonic() - started < 3


def test_past_a_waiter_cap_a_wait_reads_once_and_says_why_instead_of_failing(settings):
    settings.AIRLOCK_HTTP_LIMITS = settings.AIRLOCK_HTTP_LIMITS.replace(waiters_per_user=1, waiters_per_process=2)
    reads: list[bool] = []

    def wait(user_id: int) -> waiting.Waited[int]:
        return waiting.wait_until(
            user_id=user_id, attachment_ids=["d"], seconds=30, read=_reader(reads), settled=lambda v: False
        )

    started = time.monotonic()
    with waiting.hub.watching(user_id=1, attachment_ids=["c"]):
        assert wait(1) == waiting.Waited(1, waiting.Skipped("user-limit", 1))
        with waiting.hub.watching(user_id=2, attachment_ids=["e"]):
            assert wait(3) == waiting.Waited(2, waiting.Skipped("server-limit", 2))
    assert time.monotonic() - started < 5  # neither held the 30 s
    assert waiting.hub.count() == 0


def test_one_waiter_for_many_ids_is_woken_by_any_of_them_and_counts_once():
    reads: list[bool] = []
    threading.Timer(0.3, waiting.hub.wake, args=("m3",)).start()
    started = time.monotonic()
    with waiting.hub.watching(user_id=7, attachment_ids=["other"]):
        waited = waiting.wait_until(
            user_id=7, attachment_ids=["m1", "m2", "m3"], seconds=10, read=_reader(reads), settled=lambda v: v >= 2
        )
    assert waited.value == 2 and time.monotonic() - started < 3
    assert waiting.hub.count() == 0 and not waiting.hub._events  # every registration is gone


# --- over HTTP -----------------------------------------------------------------------


def _until(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def _pending(client, n: int) -> list[str]:
    return [create_intent(client, size=10).json()["id"] for _ in range(n)]


def _get_in_thread(api, user, url: str, answers: queue.Queue) -> threading.Thread:
    def get() -> None:
        try:
            started = time.monotonic()
            response = api(user).get(url)
            answers.put((url, response, time.monotonic() - started))
        finally:
            connection.close()  # a thread that ends holding a connection leaks it

    thread = threading.Thread(target=get)
    thread.start()
    return thread


def test_fifty_waiters_of_one_user_all_get_200_those_past_the_cap_at_once(alice, api, settings):
    # The burst: one user, 50 files, each client waiting with ?wait= (defaults: 32 per user).
    assert settings.AIRLOCK_HTTP_LIMITS.waiters_per_user == 32
    ids = _pending(api(alice), 50)
    answers: queue.Queue = queue.Queue()
    threads = [_get_in_thread(api, alice, f"/api/v1/attachments/{pk}?wait=30", answers) for pk in ids]
    # The 18 past the cap answer at once, with the current state; 32 are held.
    skipped = [answers.get(timeout=30) for _ in range(18)]
    for url, response, _ in skipped:
        assert response.status_code == 200, response.content
        assert response["Airlock-Wait"] == "skipped; reason=user-limit; limit=32"
        assert response.json()["status"] == "pending" and url.endswith(f"{response.json()['id']}?wait=30")
    assert waiting.hub.count() == 32
    held = set(ids) - {response.json()["id"] for _, response, _ in skipped}
    for pk in held:
        attachment_take_down(attachment_id=pk, actor="test", note="ends the wait")
    rest = [answers.get(timeout=30) for _ in range(32)]
    for thread in threads:
        thread.join(10)
    assert {response.json()["id"] for _, response, _ in rest} == held
    for _, response, seconds in rest:
        assert response.status_code == 200 and "Airlock-Wait" not in response
        assert response.json()["status"] == "rejected" and seconds < 29


def test_one_list_request_follows_many_files_and_answers_when_any_changes(alice, bob, api):
    ids = _pending(api(alice), 3)
    _pending(api(alice), 1)  # not listed: not in the answer
    foreign = _pending(api(bob), 1)[0]  # listed but not alice's: absent, and its changes do not end the wait
    Attachment.objects.filter(pk=ids[1]).update(uploaded_at=timezone.now())  # its bytes are in: startable
    answers: queue.Queue = queue.Queue()
    thread = _get_in_thread(api, alice, f"/api/v1/attachments?ids={','.join([*ids, foreign])}&wait=30", answers)
    _until(lambda: waiting.hub.count() == 1)  # one waiter for all four ids
    attachment_take_down(attachment_id=foreign, actor="test", note="bob's own business")
    thread.join(0.5)
    assert thread.is_alive(), "a change to someone else's file ended alice's wait"
    assert attachment_begin(attachment_id=ids[1])  # pending -> processing: a change, not yet an outcome
    _, response, seconds = answers.get(timeout=30)
    thread.join(10)
    assert response.status_code == 200 and "Airlock-Wait" not in response and seconds < 20
    body = response.json()
    assert {r["id"]: r["status"] for r in body["results"]} == {
        ids[0]: "pending",
        ids[1]: "processing",
        ids[2]: "pending",
    }
    assert body["next"] is None


def test_a_list_wait_answers_at_once_when_a_listed_file_is_already_an_outcome(alice, api):
    ids = _pending(api(alice), 2)
    attachment_take_down(attachment_id=ids[0], actor="test", note="done")
    started = time.monotonic()
    response = api(alice).get(f"/api/v1/attachments?ids={ids[0]},{ids[1]}&wait=30")
    assert response.status_code == 200 and time.monotonic() - started < 5
    assert {r["id"]: r["status"] for r in response.json()["results"]} == {ids[0]: "rejected", ids[1]: "pending"}


def test_a_list_wait_past_the_cap_is_skipped_and_a_timeout_is_the_current_state(alice, api, settings):
    settings.AIRLOCK_HTTP_LIMITS = settings.AIRLOCK_HTTP_LIMITS.replace(waiters_per_user=1)
    ids = _pending(api(alice), 2)
    url = f"/api/v1/attachments?ids={ids[0]},{ids[1]}&wait=0.3"
    with waiting.hub.watching(user_id=alice.pk, attachment_ids=["elsewhere"]):
        skipped = api(alice).get(url)
    assert skipped.status_code == 200 and skipped["Airlock-Wait"] == "skipped; reason=user-limit; limit=1"
    assert len(skipped.json()["results"]) == 2
    timed_out = api(alice).get(url)
    assert timed_out.status_code == 200 and "Airlock-Wait" not in timed_out
    assert [r["status"] for r in timed_out.json()["results"]] == ["pending", "pending"]


def test_the_ids_filter_lists_only_those_on_one_page_and_is_bounded(alice, api):
    client = api(alice)
    ids = _pending(client, 55)
    listed = client.get(f"/api/v1/attachments?ids={','.join(ids)}").json()
    assert sorted(r["id"] for r in listed["results"]) == sorted(ids) and listed["next"] is None  # not 50
    assert [r["id"] for r in client.get(f"/api/v1/attachments?ids={ids[3]},{ids[3]}").json()["results"]] == [ids[3]]
    for query, field in ((",".join(str(uuid.uuid4()) for _ in range(101)), "ids"), ("not-an-id", "ids"), (",,", "ids")):
        response = client.get(f"/api/v1/attachments?ids={query}")
        assert response.status_code == 400, query
        assert response.json()["error"]["code"] == "VALIDATION_ERROR" and field in response.json()["error"]["details"]
    for query in ("wait=5", f"ids={ids[0]}&wait=31", f"ids={ids[0]}&wait=nan"):
        response = client.get(f"/api/v1/attachments?{query}")
        assert response.status_code == 400 and "wait" in response.json()["error"]["details"], query


ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.redis
@pytest.mark.postgres
def test_a_change_made_in_another_process_wakes_a_list_waiter_over_redis(alice, api, settings):
    assert waiting.feed() == "redis"
    ids = _pending(api(alice), 3)
    answers: queue.Queue = queue.Queue()
    thread = _get_in_thread(api, alice, f"/api/v1/attachments?ids={','.join(ids)}&wait=30", answers)
    _until(lambda: waiting.hub.count() == 1)
    # Another process (this test's database and key prefix): its commit reaches us only over Redis.
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.faults.worker_settings",
        "AIRLOCK_FAULT_DB_NAME": str(connection.settings_dict["NAME"]),
        "AIRLOCK_FAULT_KEY_PREFIX": settings.AIRLOCK_KEY_PREFIX,
    }
    script = (
        "from attachments.services.moderation import attachment_take_down; "
        f"attachment_take_down(attachment_id='{ids[2]}', actor='other process', note='elsewhere')"
    )
    changed_at = time.monotonic()
    subprocess.run([sys.executable, "manage.py", "shell", "-c", script], cwd=ROOT, env=env, check=True, timeout=60)
    _, response, _ = answers.get(timeout=30)
    thread.join(10)
    assert time.monotonic() - changed_at < 25  # woken, not the 30 s deadline
    assert {r["id"]: r["status"] for r in response.json()["results"]}[ids[2]] == "rejected"
