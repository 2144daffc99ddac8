#!/usr/bin/env python
"""Sweep vs a bare delete: the same rows and storage deletes, timed in one run, with the EXPLAIN of the batch query.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/airlock .venv/bin/python bench/sweeper_throughput.py [--n 100000]

Runs in a scratch database (created and dropped like a test database, never
the real one) and deletes from a counting in-memory storage gateway. Two
tenants get the same expired rows (original + served copy + thumbnail each).
The bare side deletes one tenant's rows the plainest way that is still
correct: per batch one SELECT of the keys, the same storage deletes on the
same thread pool, then a plain DELETE of the derivatives and of the rows.
The sweep reaps the other tenant's rows with everything it guarantees (lock,
brakes, legal holds, audit, usage, webhook events and their outbox jobs with
--endpoints). The two alternate in rounds (a later expiry per round), so
machine load falls on both. `sweep_vs_bare_delete_ratio` is the sweep's
rows/s over the bare side's; goal >= 0.5. Prints one JSON line on stdout.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")

import django  # noqa: E402

django.setup()

from django.db import connection, transaction  # noqa: E402

from attachments.models import (  # noqa: E402
    Attachment,
    Derivative,
    Lifecycle,
    Membership,
    Status,
    Tenant,
)
from attachments.naming import derivative_key, original_key  # noqa: E402
from attachments.storage.base import ObjectInfo  # noqa: E402

T0 = datetime(2026, 1, 1, tzinfo=UTC)
CHUNK = 5000


class MemoryGateway:
    """Storage in a dict: counts deletes and remembers the (simulated) time of each one."""

    name = "memory"

    def __init__(self) -> None:
        self.objects: dict[str, datetime] = {}
        self.deleted_at: dict[str, datetime] = {}
        self.delete_calls = 0
        self.clock = T0
        self._lock = threading.Lock()

    def put(self, keys: Iterable[str], when: datetime) -> None:
        for key in keys:
            self.objects[key] = when

    def delete(self, key: str) -> bool:
        with self._lock:
            self.delete_calls += 1
            if self.objects.pop(key, None) is None:
                return False
            self.deleted_at[key] = self.clock
            return True

    def head(self, key: str) -> ObjectInfo | None:
        when = self.objects.get(key)
        return None if when is None else ObjectInfo(key=key, size=1, last_modified=when)

    def list_prefix(self, prefix: str) -> Iterator[ObjectInfo]:
        for key, when in list(self.objects.items()):
            if key.startswith(prefix):
                yield ObjectInfo(key=key, size=1, last_modified=when)


@contextmanager
def scratch_database() -> Iterator[str]:
    """A throwaway database next to the configured one (Django's test-database machinery)."""
    old_name = connection.settings_dict["NAME"]
    if connection.vendor != "sqlite":  # never test_<name>: a test run may be using that one
        connection.settings_dict["TEST"]["NAME"] = f"bench_{old_name}_{os.getpid()}"
    name = connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        yield name
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


def quiet_logs() -> None:
    logging.getLogger("airlock").setLevel(logging.WARNING)


def make_owner(slug: str = "bench", users: int = 1) -> tuple[Tenant, list]:
    from django.contrib.auth import get_user_model

    tenant = Tenant.objects.create(slug=slug, name=slug)
    User = get_user_model()
    people = User.objects.bulk_create([User(username=f"{slug}-{i}") for i in range(users)])
    if connection.vendor != "postgresql":  # bulk_create only returns pks where RETURNING works
        people = list(User.objects.filter(username__startswith=f"{slug}-").order_by("pk"))
    Membership.objects.bulk_create([Membership(user=u, tenant=tenant) for u in people])
    return tenant, people


def build_rows(
    tenant: Tenant,
    owner: Any,
    n: int,
    *,
    created_at: datetime,
    expires_at: datetime | None,
    lifecycle: str,
    gateway: MemoryGateway | None,
) -> None:
    """n rows like the pipeline leaves them: original + sanitized served copy + thumbnail."""
    for start in range(0, n, CHUNK):
        rows, derivatives, keys = [], [], []
        for i in range(start, min(n, start + CHUNK)):
            pk = uuid.uuid4()
            key = original_key(tenant_slug=tenant.slug, profile="image", attachment_id=pk)
            served = derivative_key(tenant_slug=tenant.slug, attachment_id=pk, kind="sanitized", ext="jpg")
            thumb = derivative_key(tenant_slug=tenant.slug, attachment_id=pk, kind="thumbnail", ext="webp")
            when = created_at + timedelta(milliseconds=i)
            rows.append(
                Attachment(
                    id=pk,
                    tenant=tenant,
                    owner=owner,
                    profile="image",
                    status=Status.READY,
                    filename="x.jpg",
                    declared_size=1,
                    declared_type="image/jpeg",
                    storage_key=key,
                    served_key=served,
                    created_at=when,
                    uploaded_at=when,
                    lifecycle=lifecycle,
                    expires_at=None if expires_at is None else expires_at + timedelta(milliseconds=i),
                    committed_at=when if lifecycle == Lifecycle.COMMITTED else None,
                )
            )
            derivatives.append(
                Derivative(attachment_id=pk, kind="thumbnail", storage_key=thumb, content_type="image/webp", size=1)
            )
            keys += [key, served, thumb]
        with transaction.atomic():
            Attachment.objects.bulk_create(rows)
            Derivative.objects.bulk_create(derivatives)
        if gateway is not None:
            gateway.put(keys, created_at)


def explain_batch(now: datetime, batch: int, *, after_first: bool = False) -> str:
    """EXPLAIN of a batch's locking query: the first one, or a later one (keyset cursor)."""
    from sweeper.reaping import Cursor, batch_query

    cursor = None
    if after_first:
        pk, expires_at = (
            Attachment.objects.filter(lifecycle=Lifecycle.STAGED, expires_at__lte=now)
            .order_by("expires_at", "pk")
            .values_list("pk", "expires_at")[batch]
        )
        cursor = Cursor(expires_at, pk)
    with transaction.atomic():  # SELECT … FOR UPDATE only compiles inside a transaction
        return batch_query(now, cursor, batch, lock=True).explain()


def bare_delete(tenant: Tenant, gateway: MemoryGateway, *, batch: int, workers: int, phases: dict[str, float]) -> int:
    """The plainest correct delete of a tenant's rows: SELECT keys, delete the objects, plain DELETEs."""
    from concurrent.futures import ThreadPoolExecutor

    from sweeper.reaping import delete_objects

    rows_table, derivatives_table = Attachment._meta.db_table, Derivative._meta.db_table
    deleted = 0
    with ThreadPoolExecutor(max_workers=workers) as pool:
        while True:
            mark = time.monotonic()
            with transaction.atomic():
                rows = list(
                    Attachment.objects.filter(tenant=tenant)
                    .order_by("pk")
                    .values_list("pk", "storage_key", "served_key")[:batch]
                )
                if not rows:
                    return deleted
                ids = [row[0] for row in rows]
                keys = [k for row in rows for k in row[1:] if k]
                keys += list(Derivative.objects.filter(attachment_id__in=ids).values_list("storage_key", flat=True))
                phases["select"] += time.monotonic() - mark
                mark = time.monotonic()
                delete_objects(gateway, keys, pool, workers)
                phases["storage"] += time.monotonic() - mark
                mark = time.monotonic()
                marks = ", ".join(["%s"] * len(ids))
                values = [Attachment._meta.pk.get_db_prep_value(pk, connection) for pk in ids]
                with connection.cursor() as cursor:
                    cursor.execute(f"DELETE FROM {derivatives_table} WHERE attachment_id IN ({marks})", values)
                    cursor.execute(f"DELETE FROM {rows_table} WHERE id IN ({marks})", values)
                    deleted += cursor.rowcount
            phases["delete_and_commit"] += time.monotonic() - mark


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="expired rows per side (sweep, bare)")
    parser.add_argument("--rounds", type=int, default=2, help="sweep and bare alternate this many times")
    parser.add_argument(
        "--noise",
        type=float,
        default=1.0,
        help="committed and live staged rows per expired row (the index must skip them)",
    )
    parser.add_argument(
        "--endpoints",
        type=int,
        default=0,
        help="webhook endpoints listening on the swept tenant (each delete becomes an event)",
    )
    args = parser.parse_args()
    quiet_logs()

    from django.conf import settings

    from sweeper.locks import DatabaseLock
    from sweeper.sweep import sweep_expired

    with scratch_database():
        tenant, (owner,) = make_owner()
        if args.endpoints:
            from webhooks.models import WebhookEndpoint

            WebhookEndpoint.objects.bulk_create(
                [
                    WebhookEndpoint(tenant=tenant, url=f"https://hooks{i}.example.com/airlock", event_types=[])
                    for i in range(args.endpoints)
                ]
            )
        gateway = MemoryGateway()
        per_round = args.n // args.rounds
        expiry = [T0 + timedelta(days=7 + 10 * r) for r in range(args.rounds)]
        now = expiry[-1] + timedelta(days=1)
        build_started = time.monotonic()
        bare_tenants = []
        for r in range(args.rounds):
            build_rows(
                tenant,
                owner,
                per_round,
                created_at=T0,
                expires_at=expiry[r],
                lifecycle=Lifecycle.STAGED,
                gateway=gateway,
            )
            # The bare side's rows: the same shape and objects, committed so the sweep never sees them.
            bare_tenant, (bare_owner,) = make_owner(f"bare{r}")
            build_rows(
                bare_tenant,
                bare_owner,
                per_round,
                created_at=T0,
                expires_at=None,
                lifecycle=Lifecycle.COMMITTED,
                gateway=gateway,
            )
            bare_tenants.append(bare_tenant)
        noise = int(args.n * args.noise)
        build_rows(tenant, owner, noise, created_at=T0, expires_at=None, lifecycle=Lifecycle.COMMITTED, gateway=None)
        build_rows(
            tenant,
            owner,
            noise // 2,
            created_at=now,
            expires_at=now + timedelta(days=7),
            lifecycle=Lifecycle.STAGED,
            gateway=None,
        )
        build_seconds = time.monotonic() - build_started
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute("ANALYZE")
        plan = explain_batch(now, settings.AIRLOCK_SWEEP.batch)
        plan_next = explain_batch(now, settings.AIRLOCK_SWEEP.batch, after_first=True)

        sweep_seconds = bare_seconds = 0.0
        reaped = bare_deleted = objects_deleted = 0
        stopped = []
        bare_calls = sweep_calls = 0
        bare_phases = {"select": 0.0, "storage": 0.0, "delete_and_commit": 0.0}
        for r in range(args.rounds):
            sides = ["bare", "sweep"] if r % 2 == 0 else ["sweep", "bare"]
            for side in sides:
                calls_before = gateway.delete_calls
                started = time.monotonic()
                if side == "sweep":
                    # The database lease, not Redis: a shared Redis may be flushed under us (cache.clear()).
                    report = sweep_expired(
                        now=expiry[r] + timedelta(days=1), gateway=gateway, lock=DatabaseLock("sweep-bench")
                    )
                    sweep_seconds += time.monotonic() - started
                    reaped += report.deleted
                    objects_deleted += report.objects_deleted
                    stopped.append(report.stopped)
                    sweep_calls += gateway.delete_calls - calls_before
                else:
                    bare_deleted += bare_delete(
                        bare_tenants[r],
                        gateway,
                        batch=settings.AIRLOCK_SWEEP.batch,
                        workers=settings.AIRLOCK_SWEEP.concurrency,
                        phases=bare_phases,
                    )
                    bare_seconds += time.monotonic() - started
                    bare_calls += gateway.delete_calls - calls_before

        left = Attachment.objects.filter(
            lifecycle__in=[Lifecycle.STAGED, Lifecycle.DISCARDED], expires_at__lte=now
        ).count()
        committed_intact = Attachment.objects.filter(lifecycle=Lifecycle.COMMITTED).count() == noise
        sweep_rate = reaped / sweep_seconds if sweep_seconds else None
        bare_rate = bare_deleted / bare_seconds if bare_seconds else None
        result = {
            "bench": "sweeper_throughput",
            "database": connection.vendor,
            "expired_rows": per_round * args.rounds,
            "other_rows": noise + noise // 2,
            "rounds": args.rounds,
            "endpoints": args.endpoints,
            "batch": settings.AIRLOCK_SWEEP.batch,
            "concurrency": settings.AIRLOCK_SWEEP.concurrency,
            "reaped": reaped,
            "bare_deleted": bare_deleted,
            "objects_deleted": objects_deleted,
            "storage_deletes": {"sweep": sweep_calls, "bare": bare_calls},
            "left_behind": left,
            "stopped": stopped,
            "committed_intact": committed_intact,
            "seconds": round(sweep_seconds, 3),
            "bare_seconds": round(bare_seconds, 3),
            "bare_phase_seconds": {k: round(v, 3) for k, v in bare_phases.items()},
            "rows_per_s": round(sweep_rate, 1) if sweep_rate else None,
            "bare_rows_per_s": round(bare_rate, 1) if bare_rate else None,
            "sweep_vs_bare_delete_ratio": round(sweep_rate / bare_rate, 3) if sweep_rate and bare_rate else None,
            "target_ratio": 0.5,
            "index_used": "att_sweep_expiry" in plan and "att_sweep_expiry" in plan_next,
            "explain": plan,
            "explain_next_batch": plan_next,
            "build_seconds": round(build_seconds, 1),
        }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
