#!/usr/bin/env python
"""API throughput under gunicorn (2 sync workers) on loopback: ours against bare DRF views, same server.

    python bench/api.py [--quick]

A scratch PostgreSQL database (SQLite file when PostgreSQL does not answer) is
prepared by bench/api_setup.py (which also counts queries per request), then
gunicorn serves bench.urls (the real URLs + bench/bare_views.py) with
bench.settings. wrk drives each endpoint (the Python load generator in
bench/loadgen.py when wrk is missing), ours and bare alternating, several runs;
ratio = requests/s ours ÷ bare per run, median over runs.
  intent creation   POST /api/v1/uploads            vs  one INSERT   (POST /bench/bare/insert)
  status read       GET  /api/v1/attachments/{id}   vs  one SELECT   (GET /bench/bare/select/{id})
  gated download    GET  .../{id}/download (local)  vs  one SELECT + FileResponse
Rows created by the intent runs are deleted between runs. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import loadgen  # noqa: E402
from bench.common import (  # noqa: E402
    REPO,
    Gunicorn,
    embedded_env,
    emit,
    median,
    r,
    scratch_dir,
    update_env,
    with_group_keys,
)

PG = "postgres://postgres@127.0.0.1:5432"
INTENT_BODY = {"profile": "image", "filename": "bench-intent.jpg", "size": 1000, "content_type": "image/jpeg"}
BARE_BODY = {**INTENT_BODY, "filename": "bench-bare.jpg"}
CONNECTIONS = 8


def postgres_ok() -> bool:
    try:
        import psycopg

        with psycopg.connect(f"{PG}/postgres", connect_timeout=3):
            return True
    except Exception:  # noqa: BLE001
        return False


class Database:
    def __init__(self, tmp: Path) -> None:
        self.pg = postgres_ok()
        if self.pg:
            self.name = f"airlock_bench_{os.getpid()}"
            self.url = f"{PG}/{self.name}"
            self._admin(f'DROP DATABASE IF EXISTS "{self.name}"')
            self._admin(f'CREATE DATABASE "{self.name}"')
        else:
            self.url = f"sqlite:///{tmp / 'bench.sqlite3'}"

    def _admin(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
            conn.execute(statement)

    def execute(self, statement: str, params: tuple = ()) -> None:
        if self.pg:
            import psycopg

            with psycopg.connect(self.url, autocommit=True) as conn:
                conn.execute(statement, params)
        else:
            import sqlite3

            with sqlite3.connect(self.url.removeprefix("sqlite:///")) as conn:
                conn.execute(statement.replace("%s", "?"), params)

    def drop(self) -> None:
        if self.pg:
            self._admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0}


def parse_wrk(text: str) -> dict:
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    p99 = re.search(r"\s99%\s+([\d.]+)(us|ms|s)\b", text)
    errors = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    socket_errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    total = int(errors.group(1)) if errors else 0
    if socket_errors:
        total += sum(int(x) for x in socket_errors.groups())
    return {
        "rps": rps,
        "p99_ms": float(p99.group(1)) * _UNITS[p99.group(2)] if p99 else None,
        "errors": total,
        "tool": "wrk",
    }


def lua_script(
    tmp: Path,
    *,
    method: str,
    tokens: list[str],
    paths: list[str],
    body: dict | None,
    scheme: str = "Token",
    headers: dict[str, str] | None = None,
) -> Path:
    """A wrk script rotating tokens and paths per request (`scheme` and fixed `headers` on each)."""
    lines = [
        "local tokens = {" + ",".join(f'"{t}"' for t in tokens) + "}",
        "local paths = {" + ",".join(f'"{p}"' for p in paths) + "}",
        "local i = 0",
        f'wrk.method = "{method}"',
    ]
    if body is not None:
        lines += [f"wrk.body = {json.dumps(json.dumps(body))}", 'wrk.headers["Content-Type"] = "application/json"']
    lines += [f"wrk.headers[{json.dumps(name)}] = {json.dumps(value)}" for name, value in (headers or {}).items()]
    lines += [
        "request = function()",
        "  i = i + 1",
        f'  wrk.headers["Authorization"] = "{scheme} " .. tokens[(i % #tokens) + 1]',
        "  return wrk.format(nil, paths[(i % #paths) + 1])",
        "end",
    ]
    path = tmp / f"wrk-{abs(hash((method, tuple(paths), scheme, tuple(sorted((headers or {}).items()))))) % 10**8}.lua"
    path.write_text("\n".join(lines) + "\n")
    return path


def drive(
    base: str,
    tmp: Path,
    *,
    method: str,
    tokens: list[str],
    paths: list[str],
    body: dict | None,
    seconds: float,
    scheme: str = "Token",
    headers: dict[str, str] | None = None,
) -> dict:
    if shutil.which("wrk"):
        script = lua_script(tmp, method=method, tokens=tokens, paths=paths, body=body, scheme=scheme, headers=headers)
        out = subprocess.run(
            ["wrk", "-t1", f"-c{CONNECTIONS}", f"-d{seconds:g}s", "--latency", "-s", str(script), base + paths[0]],
            capture_output=True,
            text=True,
            timeout=seconds + 60,
        )
        return parse_wrk(out.stdout)
    return loadgen.run(
        base + paths[0],
        method=method,
        paths=paths,
        connections=CONNECTIONS,
        seconds=seconds,
        bodies=[json.dumps(body).encode()] if body else None,
        headers_list=[
            {"Authorization": f"{scheme} {t}", "Content-Type": "application/json", **(headers or {})} for t in tokens
        ],
    )


def scratch_database(tmp: Path, **extra: str | dict[str, object] | None) -> tuple[Database, dict[str, str]]:
    """The API bench's scratch database and the environment that serves it (bench.settings)."""
    db = Database(tmp)
    env = embedded_env(tmp, DATABASE_URL=db.url, DJANGO_SETTINGS_MODULE="bench.settings")
    with_group_keys(env, "AIRLOCK_DB_POOL", conn_max_age=600)
    return db, update_env(env, extra)


def prepare(env: dict[str, str]) -> dict:
    """Run bench/api_setup.py in env's database; its facts (tokens, read_ids, ...); sets BENCH_TENANT_ID in env."""
    setup = subprocess.run(
        [sys.executable, "bench/api_setup.py"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )
    if setup.returncode != 0:
        raise RuntimeError(f"api_setup failed: {setup.stderr[-2000:]}")
    facts = json.loads(setup.stdout.strip().splitlines()[-1])
    env["BENCH_TENANT_ID"] = str(facts["tenant_id"])
    return facts


def status_pair(facts: dict) -> tuple[dict, dict]:
    """The status read, ours against the bare SELECT: the owner reads its own ready attachments."""
    owner = facts["tokens"][:1]
    return (
        dict(method="GET", tokens=owner, paths=[f"/api/v1/attachments/{i}" for i in facts["read_ids"]], body=None),
        dict(method="GET", tokens=owner, paths=[f"/bench/bare/select/{i}" for i in facts["read_ids"]], body=None),
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    runs = 3 if args.quick else 5
    seconds = 3.0 if args.quick else 8.0

    tmp = scratch_dir("airlock-bench-api-")
    db, env = scratch_database(tmp)
    gunicorn = None
    try:
        facts = prepare(env)
        gunicorn = Gunicorn(env, tmp)
        base = gunicorn.base

        tokens = facts["tokens"]
        owner = tokens[:1]  # reads are the owner's own attachments
        pairs = {
            "intent": (
                dict(method="POST", tokens=tokens, paths=["/api/v1/uploads"], body=INTENT_BODY),
                dict(method="POST", tokens=tokens, paths=["/bench/bare/insert"], body=BARE_BODY),
            ),
            "status": status_pair(facts),
            "download": (
                dict(
                    method="GET", tokens=owner, paths=[f"/api/v1/attachments/{facts['ready_id']}/download"], body=None
                ),
                dict(method="GET", tokens=owner, paths=[f"/bench/bare/file/{facts['ready_id']}"], body=None),
            ),
        }
        for ours, bare in pairs.values():  # warm-up: connections, imports, caches in both workers
            drive(base, tmp, seconds=1, **ours)
            drive(base, tmp, seconds=1, **bare)
        samples: dict[str, dict[str, list[dict]]] = {name: {"ours": [], "bare": []} for name in pairs}
        for n in range(runs):
            for name, (ours, bare) in pairs.items():
                order = (("ours", ours), ("bare", bare)) if n % 2 == 0 else (("bare", bare), ("ours", ours))
                for side, spec in order:
                    samples[name][side].append(drive(base, tmp, seconds=seconds, **spec))
                    # An intent writes its audit entry (TransitionLog) beside the row: that goes first.
                    for table, column in (
                        ("attachments_transitionlog", "attachment_id"),
                        ("attachments_attachment", "id"),
                    ):
                        db.execute(
                            f"DELETE FROM {table} WHERE {column} IN (SELECT id FROM attachments_attachment "
                            "WHERE filename IN (%s, %s))",
                            ("bench-intent.jpg", "bench-bare.jpg"),
                        )
        tool = samples["intent"]["ours"][0]["tool"]
    finally:
        if gunicorn is not None:
            gunicorn.stop()
        db.drop()

    def ratio(name: str) -> float:
        return median(o["rps"] / b["rps"] for o, b in zip(samples[name]["ours"], samples[name]["bare"]))

    def side(name: str, which: str) -> dict:
        runs_ = samples[name][which]
        return {
            "rps": r(median(x["rps"] for x in runs_), 1),
            "p99_ms": r(median(x["p99_ms"] for x in runs_ if x["p99_ms"] is not None), 2),
            "errors": sum(x["errors"] for x in runs_),
        }

    queries = facts["queries"]
    emit(
        {
            "api_intent_vs_bare_insert_ratio": r(ratio("intent")),
            "api_status_vs_bare_select_ratio": r(ratio("status")),
            "api_download_vs_bare_file_ratio": r(ratio("download")),
            "api": {
                name: {
                    "ours": side(name, "ours"),
                    "bare": side(name, "bare"),
                    "ratio_runs": [
                        r(o["rps"] / b["rps"]) for o, b in zip(samples[name]["ours"], samples[name]["bare"])
                    ],
                }
                for name in samples
            },
            "api_queries_per_request": queries,
            "api_list_queries_constant": queries["list_1"] == queries["list_20"],
            "api_setup": (
                f"gunicorn 2 sync workers, loopback, {tool} with {CONNECTIONS} connections, "
                f"{seconds:g}s x {runs} runs per side, database {facts['database']}, persistent connections; "
                "bare views use the same DRF stack and token auth, then one query"
            ),
        }
    )


if __name__ == "__main__":
    main()


# --- two ways of making intents, compared on one server ---------------------------------------

INTENT_LIMITS_OFF = {"AIRLOCK_RATE_LIMITS": {"intents_per_minute": 1000000, "pending_per_subject": 1000000}}


def setup_child(script: str, env: dict[str, str]) -> dict:
    """Run `script --setup` in env's database (the bench's own users and tokens); its last line's JSON."""
    made = subprocess.run(
        [sys.executable, script, "--setup"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )
    if made.returncode != 0:
        raise RuntimeError(f"setup failed: {made.stderr[-2000:]}")
    return json.loads(made.stdout.strip().splitlines()[-1])


def interleaved_intents(
    db: Database, base: str, tmp: Path, specs: dict[str, dict], *, runs: int, seconds: float, filename: str
) -> dict[str, list[dict]]:
    """Each spec driven `runs` times, the order alternating per run; the intents' rows go between runs
    (audit rows first: raw SQL has no cascade), so every side inserts into the same table size."""
    samples: dict[str, list[dict]] = {side: [] for side in specs}
    for spec in specs.values():  # warm-up: connections, imports, caches in both workers
        drive(base, tmp, seconds=1, **spec)
    sides = list(specs)
    for n in range(runs):
        for side in sides if n % 2 == 0 else sides[::-1]:
            samples[side].append(drive(base, tmp, seconds=seconds, **specs[side]))
            db.execute(
                "DELETE FROM attachments_transitionlog WHERE attachment_id IN "
                "(SELECT id FROM attachments_attachment WHERE filename = %s)",
                (filename,),
            )
            db.execute("DELETE FROM attachments_attachment WHERE filename = %s", (filename,))
            db.execute("UPDATE attachments_tenantusage SET bytes_used = 0, files_used = 0")
    return samples


def side_summary(runs: list[dict]) -> dict:
    """Median requests/s and p99 over a side's runs, and its errors."""
    return {
        "rps": r(median(x["rps"] for x in runs), 1),
        "p99_ms": r(median(x["p99_ms"] for x in runs if x["p99_ms"] is not None), 2),
        "errors": sum(x["errors"] for x in runs),
    }
