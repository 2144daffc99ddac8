"""`?wait=` waiters sleep until their attachment changes: no polling, no connection held, capped."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from attachments import waiting
from attachments.errors import RateLimited

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _changes_are_heard(settings):
    # As in serve's embedded shape or with Redis/PostgreSQL: no safety re-reads.
    settings.AIRLOCK_WAIT_RECHECK_SECONDS = 3600


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
    waiting.wait_until(user_id=1, attachment_id="a", seconds=1.5, read=_reader(reads), settled=lambda v: False)
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
            waiting.wait_until(user_id=i, attachment_id=f"g{i}", seconds=1.0, read=_reader(log),
                               settled=lambda v: False)
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
    value = waiting.wait_until(user_id=1, attachment_id="b", seconds=10, read=_reader(reads),
                               settled=lambda v: v >= 2)
    assert value == 2 and time.monotonic() - started < 3


def test_waiters_are_capped_per_user_and_per_process(settings):
    settings.AIRLOCK_WAITERS_PER_USER = 1
    settings.AIRLOCK_WAITERS_PER_PROCESS = 2
    with waiting.hub.watching(user_id=1, attachment_id="c"):
        with pytest.raises(RateLimited) as per_user:
            with waiting.hub.watching(user_id=1, attachment_id="d"):
                pass
        assert per_user.value.headers["Retry-After"] == "1"
        with waiting.hub.watching(user_id=2, attachment_id="e"):
            with pytest.raises(RateLimited):
                with waiting.hub.watching(user_id=3, attachment_id="f"):
                    pass
    assert waiting.hub.count() == 0
