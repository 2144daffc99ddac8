"""The leases this process's job threads hold right now (and the intakes they run before one): renewed while the
worker beats, handed back when it stops."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger("airlock.runtime")

_lock = threading.Lock()
_held: dict[int, tuple[uuid.UUID, uuid.UUID]] = {}  # thread id -> (attachment id, lease token)
# thread id -> attachment id: an intake (with its scan) running before its lease (pipeline.start_and_intake);
# the file is pending, so there is no lease to renew or hand back, only its job to keep.
_intakes: dict[int, uuid.UUID] = {}


@contextmanager
def holding(attachment_id: uuid.UUID, token: uuid.UUID) -> Iterator[None]:
    ident = threading.get_ident()
    with _lock:
        _held[ident] = (attachment_id, token)
    try:
        yield
    finally:
        with _lock:
            _held.pop(ident, None)


@contextmanager
def intaking(attachment_id: uuid.UUID) -> Iterator[None]:
    ident = threading.get_ident()
    with _lock:
        _intakes[ident] = attachment_id
    try:
        yield
    finally:
        with _lock:
            _intakes.pop(ident, None)


def held() -> list[tuple[uuid.UUID, uuid.UUID]]:
    with _lock:
        return list(_held.values())


def intakes() -> list[uuid.UUID]:
    with _lock:
        return list(_intakes.values())


def release_all() -> int:
    """processing → pending for every lease a job thread of this process still holds.

    A file whose intake runs before its lease is pending already: it gets a new
    intake job at once, as a released lease does.
    """
    from django.db import close_old_connections
    from django.utils import timezone

    from attachments.services.processing import attachment_release, attachment_requeue_intake

    released = 0
    for attachment_id, token in held():
        try:
            released += attachment_release(attachment_id=attachment_id, token=token, actor="system:shutdown")
        except Exception as exc:  # the database is gone too: the lease expires on its own
            log.warning(
                "could not release a lease", extra={"attachment_id": str(attachment_id), "error": str(exc)[:300]}
            )
    for attachment_id in intakes():
        try:
            attachment_requeue_intake(attachment_id=attachment_id, now=timezone.now())
            released += 1
        except Exception as exc:  # the reconciler re-drives a pending file whose job went missing
            log.warning(
                "could not requeue an intake", extra={"attachment_id": str(attachment_id), "error": str(exc)[:300]}
            )
    close_old_connections()
    return released


def renew_held() -> int:
    """Push back the lease of every job this process's threads are running (the worker's heartbeat calls it).

    A lease then runs out only when its worker stops beating, not when a step
    takes longer than the lease (a big file on a busy machine). A pending file
    whose intake runs before its lease is touched instead, so the reconciler
    does not take its job for lost while its scan runs.
    """
    from django.db import connection
    from django.utils import timezone

    from attachments.services.processing import attachment_lease_extend, attachments_touch_parked

    holding_now, intaking_now = held(), intakes()
    if not holding_now and not intaking_now:
        return 0
    renewed = 0
    try:
        for attachment_id, token in holding_now:
            renewed += attachment_lease_extend(attachment_id=attachment_id, token=token)
        if intaking_now:
            renewed += attachments_touch_parked(attachment_ids=intaking_now, now=timezone.now())
    except Exception as exc:  # the database is away: the leases may expire, the steps then find them gone
        log.warning("could not renew leases", extra={"error": str(exc)[:300]})
    finally:
        connection.close()  # this thread beats rarely: give its connection back (to the pool) in between
    return renewed
