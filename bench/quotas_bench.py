#!/usr/bin/env python
"""Intent latency with quotas on vs off, same server, same run; and why usage is a counter.

    python bench/quotas_bench.py [--quick]

One gunicorn (2 sync workers, bench.settings) on a scratch PostgreSQL database
(SQLite when PostgreSQL does not answer) serves two tenants: "quota-on" has a
byte and a file quota (set high enough that nothing is refused: the cost of
the check, not of refusals), "quota-off" has none. wrk (or bench/loadgen.py)
drives POST /api/v1/uploads with each tenant's tokens in turn, several
interleaved runs; the ratio is requests/s on ÷ off per run, median over runs
(at a fixed number of connections, throughput is the inverse of latency).
The usage counter is kept in both cases (GET /usage reports it with or
without limits): "off" leaves out only the limit in the conditional UPDATE.

Then, on PostgreSQL, the alternative the counter replaces: summing one
tenant's counted files (as an intent would under a per-tenant lock), timed for
N files (median of several runs), beside the counter's conditional UPDATE.
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.api import (  # noqa: E402
    CONNECTIONS,
    INTENT_LIMITS_OFF,
    Database,
    interleaved_intents,
    setup_child,
    side_summary,
)
from bench.common import Gunicorn, embedded_env, emit, median, r, scratch_dir  # noqa: E402

USERS = 20
BODY = {"profile": "image", "filename": "bench-quota.jpg", "size": 1000, "content_type": "image/jpeg"}


def setup() -> None:
    """In the scratch database: the two tenants and their users; prints their tokens."""
    from bench.common import bench_django, make_user

    bench_django("bench.settings")
    from attachments.models import Tenant

    on = [make_user(f"on-{i}", tenant="quota-on") for i in range(USERS)]
    off = [make_user(f"off-{i}", tenant="quota-off") for i in range(USERS)]
    Tenant.objects.filter(slug="quota-on").update(quota_bytes=10**15, quota_files=10**9)
    emit({"on": [u.api_token for u in on], "off": [u.api_token for u in off]})


def sum_vs_counter(db: Database, files: int, rounds: int) -> dict:
    """PostgreSQL: the per-intent SUM over one tenant's `files` counted rows vs the counter's UPDATE."""
    import psycopg

    with psycopg.connect(db.url, autocommit=True) as conn:
        tenant_id = conn.execute("SELECT id FROM attachments_tenant WHERE slug = 'quota-off'").fetchone()[0]
        owner_id = conn.execute(
            "SELECT user_id FROM attachments_membership WHERE tenant_id = %s LIMIT 1", (tenant_id,)
        ).fetchone()[0]
        # Rows as intents and the pipeline leave them: mostly ready and committed, some pending.
        conn.execute(
            """INSERT INTO attachments_attachment (id, tenant_id, owner_id, profile, status, filename, declared_size,
                   declared_type, storage_key, served_key, content_key, quarantine_key, stored_size, size,
                   content_type, sha256, metadata, text, reason_code, reason_message, attempts, step, lifecycle,
                   created_at, updated_at, delete_attempts, delete_error, declared_sha256, scan_signatures,
                   legal_hold, upload_sealed)
               SELECT gen_random_uuid(), %s, %s, 'image', CASE WHEN g %% 10 = 0 THEN 'pending' ELSE 'ready' END,
                   'sum.jpg', 1000 + g %% 5000, 'image/jpeg', 'bench/sum/' || g, '', '', '',
                   CASE WHEN g %% 10 = 0 THEN NULL ELSE 1000 + g %% 5000 END, NULL, 'image/jpeg', '', '{}', '',
                   '', '', 0, '', CASE WHEN g %% 3 = 0 THEN 'staged' ELSE 'committed' END, now(), now(), 0, '', '',
                   '', false, false
               FROM generate_series(1, %s) g""",
            (tenant_id, owner_id, files),
        )
        conn.execute("VACUUM ANALYZE attachments_attachment")
        sum_sql = (
            "SELECT COUNT(*), SUM(COALESCE(stored_size, declared_size)) FROM attachments_attachment "
            "WHERE tenant_id = %s AND status IN ('pending', 'processing', 'ready') "
            "AND lifecycle IN ('staged', 'committed')"
        )
        update_sql = (
            "UPDATE attachments_tenantusage SET bytes_used = bytes_used + 0, files_used = files_used + 0 "
            "WHERE tenant_id = %s AND bytes_used <= %s AND files_used <= %s"
        )

        def timed_ms(sql: str, params: tuple) -> float:
            """The statement alone, inside a transaction rolled back after it: the commit an intent
            pays anyway (it inserts its row in the same transaction) is not part of either figure."""
            samples = []
            for _ in range(rounds):
                with conn.transaction(force_rollback=True):
                    start = time.perf_counter()
                    cursor = conn.execute(sql, params)
                    if cursor.description is not None:
                        cursor.fetchall()
                    samples.append((time.perf_counter() - start) * 1000)
            return median(samples)

        timed_ms(sum_sql, (tenant_id,))  # warm the cache: the best case for the sum
        result = {
            "files": files,
            "sum_ms": r(timed_ms(sum_sql, (tenant_id,)), 2),
            "counter_update_ms": r(timed_ms(update_sql, (tenant_id, 10**15, 10**9)), 3),
        }
        conn.execute("DELETE FROM attachments_attachment WHERE filename = 'sum.jpg'")
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--setup", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.setup:
        setup()
        return
    runs = 3 if args.quick else 5
    seconds = 3.0 if args.quick else 8.0
    files = 20_000 if args.quick else 100_000

    tmp = scratch_dir("airlock-bench-quotas-")
    db = Database(tmp)
    env = embedded_env(
        tmp,
        DATABASE_URL=db.url,
        DJANGO_SETTINGS_MODULE="bench.settings",
        AIRLOCK_DB_POOL={"conn_max_age": 600},
        **INTENT_LIMITS_OFF,
    )
    gunicorn = None
    try:
        tokens = setup_child("bench/quotas_bench.py", env)
        gunicorn = Gunicorn(env, tmp)
        specs = {
            side: dict(method="POST", tokens=tokens[side], paths=["/api/v1/uploads"], body=BODY)
            for side in ("on", "off")
        }
        samples = interleaved_intents(
            db, gunicorn.base, tmp, specs, runs=runs, seconds=seconds, filename=BODY["filename"]
        )
        tool = samples["on"][0]["tool"]
        alternative = sum_vs_counter(db, files, 7) if db.pg else None
    finally:
        if gunicorn is not None:
            gunicorn.stop()
        db.drop()

    ratios = [on["rps"] / off["rps"] for on, off in zip(samples["on"], samples["off"])]
    emit(
        {
            "quota_intent_on_vs_off_ratio": r(median(ratios)),
            "quota_intent": {
                "on": side_summary(samples["on"]),
                "off": side_summary(samples["off"]),
                "ratio_runs": [r(x) for x in ratios],
            },
            "quota_usage_sum_alternative": alternative,
            "quota_setup": (
                f"gunicorn 2 sync workers, loopback, {tool} with {CONNECTIONS} connections, "
                f"{seconds:g}s x {runs} runs per side, database {'postgresql' if db.pg else 'sqlite'}; "
                f"{USERS} users per tenant; on = byte and file quota (never reached), off = none"
            ),
        }
    )


if __name__ == "__main__":
    main()
