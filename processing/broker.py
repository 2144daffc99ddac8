"""Dramatiq's Redis broker, with a doorbell instead of polling for idle consumers.

Dramatiq's consumer asks Redis for messages (a Lua script per ask) and, finding
none, sleeps a backoff of up to the worker timeout and asks again: every queue
and delay queue of every worker process asks about ten times a second
(AIRLOCK_SERVE.worker_poll_ms = 100), whether or not anything was sent. On a shared
Redis that is most of what the broker carries, and it grows with workers ×
queues.

Here a send also pushes a token onto the queue's bell, a Redis list
`<namespace>:<queue>.bell`, in the same script (one round trip, as before). A
consumer that found its queue empty blocks on its bell (BLPOP) instead of
sleeping: the first token wakes exactly one idle consumer, which then asks for
the messages as before. So an idle worker costs nothing per queue but one
blocking wait per DEFAULT_IDLE_WAIT_SECONDS (10 s), and a file's next step is
picked up as soon as it is sent instead of after a poll interval.

What stays Dramatiq's: the message layout, the fetch into the worker's ack set
(a worker killed mid-job loses nothing: its unacked messages are handed back
by Dramatiq's maintenance, and our reconciler re-drives their files), acks,
nacks, the delay queues and maintenance. What rides along:

- Tokens are only hints. A consumer still asks when its wait times out, so a
  message that rang no bell (handed back by maintenance, sent by an older
  process) is found within the wait; a consumer woken for a message someone
  else already took finds nothing, and clears its bell (the stale tokens of
  messages busy consumers fetched without waiting).
- A bell holds at most BELL_CAP tokens: more would only wake more consumers
  than a burst needs.
- A consumer whose ask came back short of what it asked for knows the queue
  was empty then: it waits on the bell before asking again, so a quiet queue
  costs one ask per message, not an ask after each.
- A delay queue's consumer holding delayed messages waits no longer than the
  next one is due (its thread moves it to the queue then).
- A worker stopping wakes its consumers' waits at once, and they poll as
  Dramatiq's do while the worker's jobs finish.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any

import redis
from dramatiq.broker import MessageProxy
from dramatiq.brokers.redis import RedisBroker as DramatiqRedisBroker
from dramatiq.brokers.redis import _RedisConsumer
from dramatiq.common import current_millis, dq_name
from dramatiq.errors import ConnectionClosed
from dramatiq.message import Message

BELL_CAP = 1000
MAINTENANCE_CHANCE = 10_000  # per million dispatches (Dramatiq's default: 1,000)
# An idle consumer's own look at its queue, between bells: it bounds the wait of a message that
# rang none (handed back by Dramatiq's maintenance) at about 2 Redis commands/s per idle process,
# and stays under a third of Dramatiq's heartbeat timeout (each look beats it).
DEFAULT_IDLE_WAIT_SECONDS = 10.0

# The enqueue half of Dramatiq's dispatch script (the same keys), plus the bell.
ENQUEUE = """
redis.call('hset', KEYS[2], ARGV[1], ARGV[2])
redis.call('rpush', KEYS[1], ARGV[1])
if redis.call('llen', KEYS[3]) < tonumber(ARGV[3]) then
  redis.call('rpush', KEYS[3], '1')
end
"""
SCRIPTS = {"enqueue_ring": ENQUEUE}


class RedisBroker(DramatiqRedisBroker):
    """Dramatiq's RedisBroker whose sends ring the queue's bell and whose idle consumers wait on it."""

    def __init__(self, *, idle_wait_seconds: float = DEFAULT_IDLE_WAIT_SECONDS, **options: Any) -> None:
        # Dramatiq runs its maintenance (handing back a dead worker's unacked messages) in one
        # dispatch out of a thousand, which polling made every few seconds per worker process.
        # Without polling that would be every ~15 min when idle: one in a hundred makes it every
        # ~1.5 min idle, and every hundred fetches under load (a few commands each time).
        options.setdefault("maintenance_chance", MAINTENANCE_CHANCE)
        super().__init__(**options)
        # An idle consumer's timed-out wait is also when it asks, and each ask beats Dramatiq's
        # heartbeat for this process: well within the heartbeat timeout, or its unacked jobs are handed back.
        self.idle_wait_seconds = min(max(0.1, float(idle_wait_seconds)), self.heartbeat_timeout / 3000)
        self._enqueue_ring = self.client.register_script(ENQUEUE)
        self._consumers: weakref.WeakSet[DoorbellConsumer] = weakref.WeakSet()
        self._consumers_lock = threading.Lock()

    @property
    def consumer_class(self):
        return DoorbellConsumer

    def bell_key(self, queue_name: str) -> str:
        return f"{self.namespace}:{queue_name}.bell"

    def do_enqueue(self, queue_name: str, message_id: str, data: bytes) -> None:
        """Store the message, queue its id and ring the bell: one script, one round trip."""
        queue = f"{self.namespace}:{queue_name}"
        self._enqueue_ring(keys=[queue, f"{queue}.msgs", self.bell_key(queue_name)], args=[message_id, data, BELL_CAP])

    def do_requeue(self, queue_name: str, *message_ids: str) -> Any:
        """Dramatiq's requeue (a stopping worker's prefetched messages), then a token per message for idle consumers."""
        done = self._dispatch("requeue")(queue_name, *message_ids)
        if message_ids:
            self.client.rpush(self.bell_key(queue_name), *(["1"] * min(len(message_ids), BELL_CAP)))
        return done

    def _register(self, consumer: DoorbellConsumer) -> None:
        with self._consumers_lock:
            self._consumers.add(consumer)

    def emit_before(self, signal: str, *args: Any, **kwargs: Any) -> None:
        if signal == "worker_shutdown" and args:
            # The worker's consumers stop waiting on their bells: its stop must not wait out an idle wait.
            # Marked on the thread too: a consumer its thread makes after this one knows at once.
            for thread in list(getattr(args[0], "consumers", {}).values()):
                thread.airlock_stopping = True
                consumer = getattr(thread, "consumer", None)
                if isinstance(consumer, DoorbellConsumer):
                    consumer.interrupt()
        super().emit_before(signal, *args, **kwargs)


class DoorbellConsumer(_RedisConsumer):
    """Dramatiq's Redis consumer that, with nothing to fetch, blocks on its queue's bell instead of polling."""

    broker: RedisBroker

    def __init__(self, broker: RedisBroker, queue_name: str, prefetch: int, timeout: int) -> None:
        super().__init__(broker, queue_name, prefetch, timeout)
        self._bell = broker.bell_key(queue_name)
        # Its own connection: a blocked BLPOP must not hold one the fetches and acks need, and
        # closing it is how a stopping worker wakes the wait.
        # Its reads may block for the whole wait: redis-py's default read timeout (5 s) would end it as an error.
        self._waits = redis.ConnectionPool(
            connection_class=broker.client.connection_pool.connection_class,
            **{**broker.client.connection_pool.connection_kwargs, "socket_timeout": broker.idle_wait_seconds + 5},
        )
        self._waiter = redis.Redis(connection_pool=self._waits)
        self._drained = False  # the last fetch came back short: the queue was empty then
        self._stopping = False
        broker._register(self)

    def interrupt(self) -> None:
        """Stop waiting on the bell from now on (the worker is stopping), and wake a wait under way."""
        self._stopping = True
        try:
            self._waits.disconnect(inuse_connections=True)
        except Exception:  # noqa: BLE001 - the wait times out by itself at worst
            pass

    def close(self) -> None:
        self._stopping = True
        self._waits.disconnect(inuse_connections=True)
        super().close()

    def __next__(self) -> Any:
        if self._stopping or getattr(threading.current_thread(), "airlock_stopping", False):
            self._stopping = True
            return super().__next__()  # Dramatiq's polling while the worker's jobs finish
        try:
            while True:
                if self.message_cache:
                    data = self.message_cache.pop(0)
                    if data is None:  # as Dramatiq's consumer: a message gone between its id and its body
                        continue
                    self.misses = 0
                    message = Message.decode(data)
                    self.queued_message_ids.add(message.message_id)
                    return MessageProxy(message)
                room = self.prefetch - self.outstanding_message_count
                if room <= 0:  # full: an ack makes room, no need to ask Redis meanwhile
                    time.sleep(self.timeout / 1000)
                    return None
                rang = None
                if self._drained:
                    try:
                        rang = self._wait_for_bell()
                    except Exception:
                        if self._stopping:  # the wait's connection was closed under it: that is the wake-up
                            return None
                        raise
                    if self._stopping:
                        return None
                messages = self.broker.do_fetch(self.queue_name, room)
                self._drained = len(messages) < room
                if not messages:
                    if rang:  # woken for a message another consumer took: drop the other stale tokens too
                        self.broker.client.delete(self._bell)
                    return None
                self.message_cache = messages
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            if self._stopping:
                return None
            raise ConnectionClosed(exc) from None

    def _wait_for_bell(self) -> bool:
        """Block until a token rings (True) or the wait runs out (False), at most until a delayed message is due."""
        wait = self.broker.idle_wait_seconds
        due = _next_delayed_due_ms(self.queue_name)
        if due is not None:
            wait = min(wait, max(0.0, (due - current_millis()) / 1000))
        if wait < 0.01:
            return False
        # BLPOP's timeout is in seconds with decimals (Redis 6+).
        return self._waiter.blpop([self._bell], timeout=round(wait, 2)) is not None


def _next_delayed_due_ms(queue_name: str) -> int | None:
    """When the next delayed message this delay queue's consumer thread holds is due (None: it holds none).

    Dramatiq's consumer thread keeps the delayed messages it fetched in memory
    and moves each to its queue when due, between two of our returns: we must
    return by then.
    """
    if not queue_name.endswith(dq_name("")):
        return None
    held = getattr(threading.current_thread(), "delay_queue", None)
    items = getattr(held, "queue", None)
    if not items:
        return None
    try:
        return int(min(item.priority for item in list(items)))
    except (AttributeError, TypeError, ValueError):
        return current_millis()  # unknown: do not wait
