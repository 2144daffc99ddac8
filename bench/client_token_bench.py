#!/usr/bin/env python
"""Intents with a client token vs with the service token acting for a subject, same server, same run.

    python bench/client_token_bench.py [--quick]

One gunicorn (2 sync workers, bench.settings) on a scratch PostgreSQL database
(SQLite when PostgreSQL does not answer) serves one host account. Its people
upload two ways: with client tokens the host minted (one per subject, each
with a file and byte budget large enough never to refuse, so the budget's
conditional UPDATE is paid as in real use), and with the host's service token
sending `Airlock-Subject`. wrk (or bench/loadgen.py) drives POST /api/v1/uploads
on each side in turn, several interleaved runs; the ratio is requests/s client
÷ service per run, median over runs. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.api import CONNECTIONS, Database, drive  # noqa: E402
from bench.common import REPO, Gunicorn, embedded_env, emit, median, r, scratch_dir  # noqa: E402

SUBJECTS = 20
BODY = {"profile": "image", "filename": "bench-client.jpg", "size": 1000, "content_type": "image/jpeg"}


def setup() -> None:
    """In the scratch database: the host account and one client token per subject; prints the tokens."""
    from bench.common import bench_django, make_user

    bench_django("bench.settings")
    from attachments.services.client_tokens import client_token_issue

    host = make_user("host", tenant="hosted")
    clients = [
        client_token_issue(user=host, subject=f"person-{i}", ttl_seconds=86400, max_files=10**9, max_bytes=10**15).key
        for i in range(SUBJECTS)
    ]
    emit({"service": host.api_token, "clients": clients})


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

    tmp = scratch_dir("airlock-bench-client-tokens-")
    db = Database(tmp)
    env = embedded_env(
        tmp,
        DATABASE_URL=db.url,
        DJANGO_SETTINGS_MODULE="bench.settings",
        AIRLOCK_DB_CONN_MAX_AGE="600",
        AIRLOCK_INTENTS_PER_MINUTE="1000000",
        AIRLOCK_MAX_PENDING_PER_USER="1000000",
    )
    gunicorn = None
    samples: dict[str, list[dict]] = {"client": [], "service": []}
    try:
        made = subprocess.run(
            [sys.executable, "bench/client_token_bench.py", "--setup"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if made.returncode != 0:
            raise RuntimeError(f"setup failed: {made.stderr[-2000:]}")
        tokens = json.loads(made.stdout.strip().splitlines()[-1])
        gunicorn = Gunicorn(env, tmp)
        base = gunicorn.base
        common = dict(method="POST", paths=["/api/v1/uploads"], body=BODY)
        specs = {
            # Browsers send Bearer; the host sends its token for one person at a time.
            "client": dict(tokens=tokens["clients"], scheme="Bearer", **common),
            "service": dict(tokens=[tokens["service"]], headers={"Airlock-Subject": "person-0"}, **common),
        }
        for spec in specs.values():  # warm-up: connections, imports, caches in both workers
            drive(base, tmp, seconds=1, **spec)
        for n in range(runs):
            for side in ("client", "service") if n % 2 == 0 else ("service", "client"):
                samples[side].append(drive(base, tmp, seconds=seconds, **specs[side]))
                # Rows go between runs, so both sides insert into the same table size (audit rows first:
                # raw SQL has no cascade).
                db.execute(
                    "DELETE FROM attachments_transitionlog WHERE attachment_id IN "
                    "(SELECT id FROM attachments_attachment WHERE filename = %s)",
                    (BODY["filename"],),
                )
                db.execute("DELETE FROM attachments_attachment WHERE filename = %s", (BODY["filename"],))
                db.execute("UPDATE attachments_tenantusage SET bytes_used = 0, files_used = 0")
        tool = samples["client"][0]["tool"]
    finally:
        if gunicorn is not None:
            gunicorn.stop()
        db.drop()

    def side(which: str) -> dict:
        runs_ = samples[which]
        return {
            "rps": r(median(x["rps"] for x in runs_), 1),
            "p99_ms": r(median(x["p99_ms"] for x in runs_ if x["p99_ms"] is not None), 2),
            "errors": sum(x["errors"] for x in runs_),
        }

    ratios = [c["rps"] / s["rps"] for c, s in zip(samples["client"], samples["service"])]
    emit(
        {
            "client_token_vs_service_token_intent_ratio": r(median(ratios)),
            "client_token_intent": {
                "client": side("client"),
                "service": side("service"),
                "ratio_runs": [r(x) for x in ratios],
            },
            "client_token_setup": (
                f"gunicorn 2 sync workers, loopback, {tool} with {CONNECTIONS} connections, "
                f"{seconds:g}s x {runs} runs per side, database {'postgresql' if db.pg else 'sqlite'}; "
                f"client = {SUBJECTS} client tokens (Bearer) with a file and byte budget; "
                "service = the host's API token with Airlock-Subject"
            ),
        }
    )


if __name__ == "__main__":
    main()
