"""Delivery bookkeeping commits without waiting for the disk (synchronous_commit off).

A delivery writes twice around its HTTP request: the claim (lease, attempts) and
the outcome (attempt row, status, the retry's outbox job). Waiting for a WAL
flush at each commit limits deliveries per second on PostgreSQL
(bench/webhooks_bench.py --switch webhook_async_commit measures it with and
without).

The durability it gives up, and why that is safe here: with synchronous_commit
off only a crash of the PostgreSQL server or its machine (not of Airlock) can
lose the last ~0.6 s (3 x wal_writer_delay) of these commits, whole transactions,
in commit order, never a torn one; nothing else is affected (SET LOCAL: this
transaction only). Losing a claim leaves the delivery pending with no lease;
losing an outcome leaves it pending with the claim's lease (its retry job and
attempt row go with it). Either way webhooks/services/tick.py's redrive sends it
again once the lease has passed: at-least-once holds, the receiver drops the
duplicate by its webhook-id, and the attempts count and the attempt log may miss
that one attempt. The event itself was committed durably with the change it
reports. On SQLite the transaction is a plain one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction


@contextmanager
def bookkeeping() -> Iterator[None]:
    """A delivery's claim or outcome, in a transaction whose commit does not wait for the disk."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL synchronous_commit TO OFF")
        yield
