"""`?wait=`: waiters sleep on an event until their attachment changes; nobody polls the database.

Every status transition announces the attachment's id once its transaction
commits (services/transitions.py calls `changed`). Within a process the waiters
are woken directly; across processes the id travels over Redis pub/sub (when
REDIS_URL is set) or PostgreSQL NOTIFY, and one listener thread per process,
started with the first waiter, wakes the local waiters. A listener that loses
its connection wakes every waiter once it is back (they re-read once), so a
notification lost meanwhile costs one read, not a full wait.

With neither Redis nor PostgreSQL (the embedded default) a change made in
another process (a separate worker on SQLite) cannot be heard: waiters then
re-read every RECHECK_SECONDS, unless this process runs the
worker itself (`serve`'s in-process worker), where every change is local.

One waiter can follow many attachments (the list's `?ids=…&wait=`): its event
is registered under each id and counts once against the caps.

Waiters are capped per process and per user: each one holds a web thread, never
a database connection. Past a cap the wait is skipped, not refused: the caller
gets the current state at once, told why (`Waited.skipped`). Waiting is a hint.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, TypeVar

from django.conf import settings
from django.db import connection, transaction

from .shared_redis import shared_redis

log = logging.getLogger("airlock.waiting")
# Only where no change can be heard (see above): a re-read costs one query per waiter.
RECHECK_SECONDS = 2.0

T = TypeVar("T")
CHANNEL = "airlock_status"


@dataclass(frozen=True)
class Skipped:
    """Why a wait was not held: which cap was reached, and its value."""

    reason: str  # "user-limit" or "server-limit"
    limit: int


class TooManyWaiters(Exception):
    def __init__(self, skipped: Skipped) -> None:
        super().__init__(skipped.reason)
        self.skipped = skipped


@dataclass(frozen=True)
class Waited(Generic[T]):
    """What a wait read last, and why it did not wait at all (None when it did)."""

    value: T
    skipped: Skipped | None = None


class Hub:
    """This process's waiters: attachment id -> events to set when it changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: dict[str, set[threading.Event]] = {}
        self._per_user: Counter[int] = Counter()
        self._total = 0
        self.local_changes_only = False  # set by serve when the worker runs in this process

    @contextmanager
    def watching(self, *, user_id: int, attachment_ids: Collection[str]) -> Iterator[threading.Event]:
        """One event, set when any of `attachment_ids` changes; TooManyWaiters past a cap."""
        event = threading.Event()
        keys = set(attachment_ids)
        with self._lock:
            if self._total >= settings.AIRLOCK_HTTP_LIMITS.waiters_per_process:
                raise TooManyWaiters(Skipped("server-limit", settings.AIRLOCK_HTTP_LIMITS.waiters_per_process))
            if self._per_user[user_id] >= settings.AIRLOCK_HTTP_LIMITS.waiters_per_user:
                raise TooManyWaiters(Skipped("user-limit", settings.AIRLOCK_HTTP_LIMITS.waiters_per_user))
            self._total += 1
            self._per_user[user_id] += 1
            for key in keys:
                self._events.setdefault(key, set()).add(event)
        try:
            yield event
        finally:
            with self._lock:
                self._total -= 1
                self._per_user[user_id] -= 1
                if self._per_user[user_id] <= 0:
                    del self._per_user[user_id]
                for key in keys:
                    waiters = self._events.get(key)
                    if waiters is not None:
                        waiters.discard(event)
                        if not waiters:
                            del self._events[key]

    def wake(self, attachment_id: str) -> None:
        with self._lock:
            events = list(self._events.get(attachment_id, ()))
        for event in events:
            event.set()

    def wake_all(self) -> None:
        with self._lock:
            events = [e for waiters in self._events.values() for e in waiters]
        for event in events:
            event.set()

    def count(self) -> int:
        with self._lock:
            return self._total


hub = Hub()


# --- announcing changes --------------------------------------------------------------


def changed(attachment_id: object) -> None:
    """Announce a committed change of one attachment (call inside the transaction that makes it)."""
    key = str(attachment_id)
    if connection.vendor == "postgresql" and not settings.REDIS_URL:
        # Delivered by PostgreSQL at commit, and only if the transaction commits.
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, key])
    transaction.on_commit(lambda: _after_commit(key))


def _after_commit(key: str) -> None:
    hub.wake(key)
    if settings.REDIS_URL:
        try:
            shared_redis().publish(_redis_channel(), key)
        except Exception as exc:  # waiters elsewhere see the change at their deadline at worst
            log.warning("could not publish a status change", extra={"attachment_id": key, "error": str(exc)[:200]})


# --- listening -------------------------------------------------------------------------

_listener: threading.Thread | None = None
_listener_lock = threading.Lock()
_stopping = threading.Event()
_connected = threading.Event()  # the listener is subscribed: a change published from now on reaches us


def _redis_channel() -> str:
    return f"{settings.AIRLOCK_KEY_PREFIX}:{CHANNEL}"


def feed() -> str:
    """Where changes made by other processes come from: "redis", "postgresql" or "none"."""
    if settings.REDIS_URL:
        return "redis"
    if connection.vendor == "postgresql":
        return "postgresql"
    return "none"


def ensure_listener(timeout: float = 2.0) -> bool:
    """Start this process's listener if needed; True once it is subscribed.

    The first waiters wait (briefly) for the subscription instead of being woken
    by it: a wake-up on connect would cost each of them a second read.
    """
    global _listener
    if _listener is None or not _listener.is_alive():
        kind = feed()
        if kind == "none":
            return False
        with _listener_lock:
            if _listener is None or not _listener.is_alive():
                _stopping.clear()
                _connected.clear()
                target = _listen_redis if kind == "redis" else _listen_postgresql
                _listener = threading.Thread(target=_forever, args=(target,), name=f"airlock-wait-{kind}", daemon=True)
                _listener.start()
    return _connected.wait(timeout)


def stop_listener() -> None:
    _stopping.set()
    hub.wake_all()


def _forever(listen: Callable[[Callable[[], None]], None]) -> None:
    delay = 0.5
    while not _stopping.is_set():
        try:
            listen(_on_connected)  # returns only on stop; raises when the connection is lost
        except Exception as exc:  # noqa: BLE001 - reconnect with backoff, waiters fall back to their deadline
            _connected.clear()
            log.warning("status listener lost its connection", extra={"error": str(exc)[:200]})
            _stopping.wait(delay)
            delay = min(delay * 2, 10.0)
        else:
            delay = 0.5


def _on_connected() -> None:
    _connected.set()
    hub.wake_all()  # anything missed while (re)connecting: waiters re-read once


def _listen_redis(on_connected: Callable[[], None]) -> None:
    import redis

    url = settings.REDIS_URL
    if not url:
        raise RuntimeError("REDIS_URL is not set")
    client = redis.Redis.from_url(url, socket_timeout=None, socket_connect_timeout=2, health_check_interval=30)
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    try:
        pubsub.subscribe(_redis_channel())
        on_connected()
        while not _stopping.is_set():
            message = pubsub.get_message(timeout=1.0)
            if message and message.get("type") == "message":
                data = message["data"]
                hub.wake(data.decode() if isinstance(data, bytes) else str(data))
    finally:
        pubsub.close()
        client.close()


def _listen_postgresql(on_connected: Callable[[], None]) -> None:
    import psycopg

    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    params.pop("prepare_threshold", None)
    # Its own connection, outside the pool: LISTEN needs one that stays put.
    params.setdefault("connect_timeout", 5)
    with psycopg.connect(autocommit=True, **params) as conn:
        conn.execute(f"LISTEN {CHANNEL}")
        on_connected()
        while not _stopping.is_set():
            for notify in conn.notifies(timeout=1.0, stop_after=1000):
                hub.wake(notify.payload)


# --- waiting -----------------------------------------------------------------------------


def wait_until(
    *,
    user_id: int,
    attachment_ids: Collection[str],
    seconds: float,
    read: Callable[[], T],
    settled: Callable[[T], bool],
) -> Waited[T]:
    """read() until settled(value) or `seconds` pass, sleeping until one of `attachment_ids` changes (no polling).

    Past a waiter cap it reads once and says why it did not wait: a read never
    fails because the server would rather not hold it open.
    """
    deadline = time.monotonic() + seconds
    try:
        with hub.watching(user_id=user_id, attachment_ids=attachment_ids) as event:
            if ensure_listener(timeout=min(2.0, seconds)):
                event.clear()  # the subscription's wake-up is covered by the read below
            recheck = None if hub.local_changes_only or feed() != "none" else RECHECK_SECONDS
            value = read()  # after registering and subscribing: a change from now on wakes this waiter
            while not settled(value) and not _stopping.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                if not connection.in_atomic_block:
                    connection.close()  # back to the pool: a sleeping waiter holds no connection
                event.wait(left if recheck is None else min(left, recheck))
                event.clear()
                value = read()
            return Waited(value)
    except TooManyWaiters as busy:
        return Waited(read(), busy.skipped)
