"""Transactional outbox: jobs are rows written with the state change, then relayed.

The broker is only a doorbell. A message that never reaches it is relayed by
the next tick; one that is lost inside it is rebuilt by the reconciler.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import dramatiq
from django.db import connections, transaction
from django.db.models import F
from django.utils import timezone

from ..jobs import Job
from ..models import OutboxMessage
from ..request_id import current_request_id

log = logging.getLogger("airlock.outbox")

# Set in a management command's process on the embedded default: its broker lives in
# its own memory and dies with it, so its jobs stay in the outbox for the running
# `serve` to relay (attachments/services/handoff.py).
_relay_elsewhere = False


def broker_in_process() -> bool:
    """The configured broker is the in-process stub: its messages exist only in this process."""
    from dramatiq.brokers.stub import StubBroker

    return isinstance(dramatiq.get_broker(), StubBroker)


def relay_elsewhere(on: bool = True) -> None:
    """From now on, leave this process's jobs in the outbox for another process's relay tick."""
    global _relay_elsewhere
    _relay_elsewhere = on


def enqueue(job: Job, *args: object, delay_ms: int = 0) -> OutboxMessage:
    """Record a job in the current transaction; send it once the transaction commits."""
    message = OutboxMessage.objects.create(
        actor_name=job.actor_name,
        queue_name=job.queue,
        args=[str(a) for a in args],
        delay_ms=max(0, int(delay_ms)),
        request_id=current_request_id() or "",
    )
    # The row was written in this transaction, so the in-memory copy is what is
    # stored: sending it saves re-reading the row on every step of every file.
    if not _relay_elsewhere:
        transaction.on_commit(lambda: _send(message))
    return message


def enqueue_many(job: Job, arg_lists: Sequence[Sequence[object]]) -> list[OutboxMessage]:
    """Record one `job` per argument list in one INSERT; send them all once the transaction commits.

    For writers that make many jobs at once (a sweep batch's webhook deliveries):
    one statement per batch instead of one per job, each way.
    """
    if not arg_lists:
        return []
    request_id = current_request_id() or ""
    messages = OutboxMessage.objects.bulk_create(
        [
            OutboxMessage(
                actor_name=job.actor_name,
                queue_name=job.queue,
                args=[str(a) for a in args],
                delay_ms=0,
                request_id=request_id,
            )
            for args in arg_lists
        ]
    )
    if not _relay_elsewhere:
        transaction.on_commit(lambda: _send_many(messages))
    return messages


def relay_one(message_id: int) -> bool:
    """Send one outbox message to the broker; safe to call twice (at-least-once)."""
    message = OutboxMessage.objects.filter(pk=message_id, sent_at__isnull=True).first()
    if message is None:
        return False
    return _send(message)


def _send(message: OutboxMessage) -> bool:
    message_id = message.pk
    broker = dramatiq.get_broker()
    try:
        actor = broker.get_actor(message.actor_name)
        options: dict[str, Any] = {"request_id": message.request_id} if message.request_id else {}
        actor.send_with_options(args=tuple(message.args), delay=message.delay_ms or None, **options)
    except Exception as exc:  # the broker is down: the relay tick tries again
        OutboxMessage.objects.filter(pk=message_id).update(send_attempts=message.send_attempts + 1)
        log.warning("outbox relay failed", extra={"step": "outbox", "outcome": "error", "error": str(exc)})
        return False
    _mark_sent([message_id])
    return True


# Sent marks are written in bulk: the ids this process sent wait up to
# SENT_MARK_DELAY_S and go out in one UPDATE (flush_sent_marks), instead of one
# UPDATE and one commit per job. Losing them is safe: a mark that never gets
# written (the process crashed, the database was down) only makes the relay tick
# send its job again after 2 s, and every actor is idempotent (a resent job finds
# its lease taken or its step done and drops). Well under the relay tick's 2 s, so
# a live process's marks are written before the tick would resend their jobs.
# Not a setting: nothing an operator tunes. Tests set it to 0 (tests/conftest.py):
# a timer thread writing from its own connection would race a test's transaction.
SENT_MARK_DELAY_S = 0.25
_marks_lock = threading.Lock()
_unmarked: list[int] = []
_marks_timer: threading.Timer | None = None


def _mark_sent(ids: list[int]) -> None:
    global _marks_timer
    if SENT_MARK_DELAY_S <= 0:
        _write_marks(ids)
        return
    with _marks_lock:
        _unmarked.extend(ids)
        if _marks_timer is None:
            _marks_timer = threading.Timer(SENT_MARK_DELAY_S, _flush_in_timer)
            _marks_timer.daemon = True
            _marks_timer.name = "airlock-outbox-marks"
            _marks_timer.start()


def flush_sent_marks() -> int:
    """Write the sent marks this process holds, in one UPDATE; return how many it held.

    If the UPDATE fails the ids are held again, for the next flush (a later
    send's timer, or the relay tick, which flushes first).
    """
    global _marks_timer
    with _marks_lock:
        ids = list(_unmarked)
        _unmarked.clear()
        if _marks_timer is not None and _marks_timer is not threading.current_thread():
            _marks_timer.cancel()
        _marks_timer = None
    try:
        _write_marks(ids)
    except BaseException:
        with _marks_lock:
            _unmarked.extend(ids)
        raise
    return len(ids)


def _write_marks(ids: list[int]) -> None:
    if ids:
        OutboxMessage.objects.filter(pk__in=ids, sent_at__isnull=True).update(sent_at=timezone.now())


def _flush_in_timer() -> None:
    try:
        flush_sent_marks()
    except Exception as exc:  # the database is down: held for the next flush, or the tick resends
        log.warning("outbox sent marks not written", extra={"step": "outbox", "outcome": "error", "error": str(exc)})
    finally:
        connections.close_all()  # this thread's own connections (back to the pool): the thread ends here


def _flush_at_exit() -> None:
    if _unmarked:
        _flush_in_timer()


atexit.register(_flush_at_exit)


def _send_many(messages: Sequence[OutboxMessage]) -> int:
    """Send messages written together; mark the sent ones with one flush, the failed in one UPDATE."""
    broker = dramatiq.get_broker()
    sent: list[int] = []
    failed: list[int] = []
    for message in messages:
        try:
            actor = broker.get_actor(message.actor_name)
            options: dict[str, Any] = {"request_id": message.request_id} if message.request_id else {}
            actor.send_with_options(args=tuple(message.args), delay=message.delay_ms or None, **options)
        except Exception as exc:  # the broker is down: the relay tick tries again
            failed.append(message.pk)
            log.warning("outbox relay failed", extra={"step": "outbox", "outcome": "error", "error": str(exc)})
            continue
        sent.append(message.pk)
    if sent:
        _mark_sent(sent)
    if failed:
        OutboxMessage.objects.filter(pk__in=failed).update(send_attempts=F("send_attempts") + 1)
    return len(sent)


def relay_pending(*, older_than_seconds: float = 2.0, limit: int = 500) -> int:
    """Relay messages whose on-commit send did not happen (crash, broker down)."""
    flush_sent_marks()  # what this process sent and has not marked yet is not sent again
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    ids = list(
        OutboxMessage.objects.filter(sent_at__isnull=True, created_at__lte=cutoff)
        .order_by("created_at")
        .values_list("pk", flat=True)[:limit]
    )
    return sum(1 for pk in ids if relay_one(pk))
