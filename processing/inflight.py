"""The leases this process's job threads hold right now, so a stopping worker can hand them back."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger("airlock.runtime")

_lock = threading.Lock()
_held: dict[int, tuple[uuid.UUID, uuid.UUID]] = {}  # thread id -> (attachment id, lease token)


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


def held() -> list[tuple[uuid.UUID, uuid.UUID]]:
    with _lock:
        return list(_held.values())


def release_all() -> int:
    """processing → pending for every lease a job thread of this process still holds."""
    from django.db import close_old_connections

    from attachments.services.processing import attachment_release

    released = 0
    for attachment_id, token in held():
        try:
            released += attachment_release(attachment_id=attachment_id, token=token, actor="system:shutdown")
        except Exception as exc:  # the database is gone too: the lease expires on its own
            log.warning("could not release a lease", extra={"attachment_id": str(attachment_id),
                                                            "error": str(exc)[:300]})
    close_old_connections()
    return released
