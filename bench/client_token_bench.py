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
import sys
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

SUBJECTS = 20
BODY = {"profile": "image", "filename": "bench-client.jpg", "size": 1000, "content_type": "image/jpeg"}


def setup() -> None:
    """In the scratch database: the host account and one client token per subject; prints the tokens."""
    from bench.common import bench_django, make_user

    bench_django("bench.settings")
    from attachments.client_tokens.services.client_tokens import client_token_issue

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
        AIRLOCK_DB_POOL={"conn_max_age": 600},
        **INTENT_LIMITS_OFF,
    )
    gunicorn = None
    try:
        tokens = setup_child("bench/client_token_bench.py", env)
        gunicorn = Gunicorn(env, tmp)
        common = dict(method="POST", paths=["/api/v1/uploads"], body=BODY)
        specs = {
            # Browsers send Bearer; the host sends its token for one person at a time.
            "client": dict(tokens=tokens["clients"], scheme="Bearer", **common),
            "service": dict(tokens=[tokens["service"]], headers={"Airlock-Subject": "person-0"}, **common),
        }
        samples = interleaved_intents(
            db, gunicorn.base, tmp, specs, runs=runs, seconds=seconds, filename=BODY["filename"]
        )
        tool = samples["client"][0]["tool"]
    finally:
        if gunicorn is not None:
            gunicorn.stop()
        db.drop()

    ratios = [c["rps"] / s["rps"] for c, s in zip(samples["client"], samples["service"])]
    emit(
        {
            "client_token_vs_service_token_intent_ratio": r(median(ratios)),
            "client_token_intent": {
                "client": side_summary(samples["client"]),
                "service": side_summary(samples["service"]),
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
