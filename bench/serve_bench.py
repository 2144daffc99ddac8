#!/usr/bin/env python
"""`manage.py serve` as a production server: throughput against plain gunicorn, a soak, the cost of waiters.

    python bench/serve_bench.py [--quick]

PostgreSQL (a scratch database) and Redis when they answer, like bench/api.py.
  ratio    serve --no-worker --no-scheduler vs `gunicorn config.wsgi -w 2 -k sync`, both up at
           once on the same database and settings, GET /api/v1/attachments/{id} with
           bench/loadgen.py (8 keep-alive connections), paired runs alternating which goes first;
           serve_vs_gunicorn_status_ratio = median of requests/s serve ÷ gunicorn per pair, on
           PostgreSQL; serve_vs_gunicorn_embedded_ratio the same on SQLite (the embedded
           default), run after it. Each side's server CPU per request (its process tree) too.
  variants (not in the default set) ratio plus plain `gunicorn -w 2 -k gthread --threads 4` and
           serve in one web process (as it ran on SQLite before), in the same paired rounds.
  servers  (not in the default set) ratio plus granian and waitress on config.wsgi, where installed
           (`pip install granian waitress`): the measurement behind serve's choice of server.
  soak     serve (web + job process) on PostgreSQL + Redis; N clients for T seconds each
           looping intent → PUT → status → ?wait=2 → download when ready. Counts responses
           >= 500, samples pg_stat_activity (connections to the scratch database) and the RSS
           of serve's process tree; RSS growth = mean of the last quarter ÷ first quarter - 1.
  waiters  100 concurrent `?wait=30` on pending intents (5 users, 20 each); CPU seconds (user +
           system) of serve's whole process tree during the wait, minus what it spends idle over
           the same time (measured just before: scheduler ticks, idle broker consumers).
  The soak's RSS is serve's own processes (master, web processes, job process; not the
  sandbox's short-lived job processes), sampled after a warm-up (threads and pools starting).
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import loadgen  # noqa: E402
from bench.api import Database, prepare  # noqa: E402
from bench.common import (  # noqa: E402
    Gunicorn,
    ServerProcess,
    createuser,
    embedded_env,
    emit,
    free_port,
    median,
    migrate,
    r,
    scratch_dir,
    serve,
    small_jpeg,
    update_env,
)

REDIS = "redis://127.0.0.1:6379/0"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def service_env(
    tmp: Path,
    db: Database | SqliteDatabase,
    *,
    redis: bool = True,
    settings: str = "config.settings.base",
    **extra: str | dict[str, object] | None,
) -> dict[str, str]:
    """embedded_env on db's database, with Redis (under a key prefix of its own) when `redis`."""
    return embedded_env(
        tmp,
        DATABASE_URL=db.url,
        DJANGO_SETTINGS_MODULE=settings,
        REDIS_URL=REDIS if redis else None,
        AIRLOCK_KEY_PREFIX=f"bench-{uuid.uuid4().hex[:8]}",
        **extra,
    )


def redis_ok() -> bool:
    try:
        import redis

        return bool(redis.Redis.from_url(REDIS, socket_connect_timeout=2).ping())
    except Exception:  # noqa: BLE001
        return False


def tree(pid: int) -> list[int]:
    from tests.faults.support import descendants

    return [pid, *descendants(pid)]


def cpu_seconds(pid: int) -> float:
    total = 0
    for p in tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime + stime
    return total / CLOCK_TICKS


def own_processes(pid: int) -> list[int]:
    """serve itself: the master and its direct children (web processes, the job process), not the sandbox's jobs."""
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    children.append(int(entry.name))
            except OSError:
                continue
    return [pid, *children]


def rss_mb(pid: int) -> float:
    total = 0
    for p in own_processes(pid):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def alternative(name: str, env: dict[str, str], tmp: Path) -> ServerProcess | None:
    """Another WSGI server on config.wsgi, 2 cores' worth, when it is installed (they are not dependencies)."""
    binary = Path(sys.executable).parent / {"granian": "granian", "waitress": "waitress-serve"}[name]
    if not binary.exists():
        return None
    port = free_port()
    argv = {
        "granian": [
            str(binary),
            "--interface",
            "wsgi",
            "config.wsgi:application",
            "--workers",
            "2",
            "--blocking-threads",
            "2",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        "waitress": [str(binary), "--listen", f"127.0.0.1:{port}", "--threads", "8", "config.wsgi:application"],
    }
    return ServerProcess(argv[name], env, tmp / f"{name}.log", port, timeout=60)


def GunicornThreads(env: dict[str, str], tmp: Path) -> ServerProcess:
    """Plain `gunicorn -w 2 -k gthread --threads 4` on config.wsgi: the worker class serve builds on, alone."""
    port = free_port()
    return ServerProcess(
        [
            str(Path(sys.executable).parent / "gunicorn"),
            "config.wsgi:application",
            "-w",
            "2",
            "-k",
            "gthread",
            "--threads",
            "4",
            "-b",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
        ],
        env,
        tmp / "gunicorn-gthread.log",
        port,
        timeout=60,
    )


# serve without something, side by side with itself (--only variants): the environment that takes it away.
# The keep-alive linger and the accept balancer were measured this way and went (README, How `serve` serves).
VARIANTS = {"second_process": {"AIRLOCK_SERVE": {"web_processes": 1}}}  # one web process, as serve ran on SQLite before


def bench_ratio(
    tmp: Path,
    db: Database | SqliteDatabase,
    redis: bool,
    quick: bool,
    alternatives: bool = False,
    variants: bool = False,
) -> dict:
    """Status reads/s of serve beside plain gunicorn on the same database and settings, paired rounds.

    On db (PostgreSQL when it answers, else SQLite, the embedded default). With
    `variants`, serve also runs without each of VARIANTS, and plain gunicorn gthread, side by side.
    """
    # Paired rounds, alternating which side goes first; the figure is the median of the per-round ratios.
    runs, seconds = (5, 3.0) if quick else (7, 8.0)
    if variants:
        runs = max(runs, 8)
    env = service_env(tmp, db, redis=redis, settings="bench.settings")
    facts = prepare(env)
    sides: dict[str, ServerProcess] = {
        "gunicorn": Gunicorn(env, tmp),
        "serve": serve(env, tmp, "--no-worker", "--no-scheduler"),
    }
    missing = []
    if variants:
        sides["gunicorn_gthread"] = GunicornThreads(env, tmp)
        for variant, without in VARIANTS.items():
            sides[f"serve_without_{variant}"] = serve(
                update_env(dict(env), without), tmp, "--no-worker", "--no-scheduler"
            )
    if alternatives:
        for name in ("granian", "waitress"):
            server = alternative(name, env, tmp)
            if server:
                sides[name] = server
            else:
                missing.append(name)
    paths = [f"/api/v1/attachments/{i}" for i in facts["read_ids"]]
    headers = [{"Authorization": f"Token {facts['tokens'][0]}"}]
    samples: dict[str, list[dict]] = {name: [] for name in sides}
    try:
        for server in sides.values():  # warm-up: imports, connections, caches in every process
            loadgen.run(server.base + paths[0], paths=paths, headers_list=headers, seconds=1.0)
        for n in range(runs):
            order = list(sides.items()) if n % 2 == 0 else list(sides.items())[::-1]
            for name, server in order:
                before = cpu_seconds(server.proc.pid)
                sample = loadgen.run(
                    server.base + paths[0], paths=paths, headers_list=headers, connections=8, seconds=seconds
                )
                # The server's own CPU per answer (its whole process tree): steadier than req/s on a shared machine.
                sample["cpu_ms"] = (cpu_seconds(server.proc.pid) - before) * 1000 / max(1, sample["requests"])
                samples[name].append(sample)
    finally:
        for server in sides.values():
            server.stop()

    def versus(name: str, base: str = "gunicorn", key: str = "rps") -> list[float]:
        return [a[key] / b[key] for a, b in zip(samples[name], samples[base])]

    def side(name: str) -> dict:
        return {
            "rps": r(median(x["rps"] for x in samples[name]), 1),
            "p99_ms": r(median(x["p99_ms"] for x in samples[name] if x.get("p99_ms") is not None), 2),
            "server_cpu_ms_per_request": r(median(x["cpu_ms"] for x in samples[name]), 3),
            "errors": sum(x["errors"] for x in samples[name]),
        }

    name = "serve_vs_gunicorn_status_ratio" if db.pg else "serve_vs_gunicorn_embedded_ratio"
    result = {
        name: r(median(versus("serve"))),
        "serve_vs_gunicorn" if db.pg else "serve_vs_gunicorn_embedded": {
            "serve": side("serve"),
            "gunicorn": side("gunicorn"),
            "ratio_runs": [r(x) for x in versus("serve")],
            "setup": f"{facts['database']}, redis={redis}, loadgen 8 connections, "
            f"{seconds:g}s x {runs} paired runs; serve --no-worker --no-scheduler",
        },
    }
    if variants:
        # With ÷ without, per round: > 1 means it buys that much (for CPU per request, < 1 does).
        result[f"serve_variants_{'postgresql' if db.pg else 'embedded'}"] = {
            "gunicorn_gthread": {
                **side("gunicorn_gthread"),
                "serve_vs_gthread_rps": r(median(versus("serve", "gunicorn_gthread"))),
            },
            **{
                variant: {
                    "without": side(f"serve_without_{variant}"),
                    "with_vs_without_rps": r(median(versus("serve", f"serve_without_{variant}"))),
                    "with_vs_without_cpu_per_request": r(
                        median(versus("serve", f"serve_without_{variant}", key="cpu_ms"))
                    ),
                    "rounds_rps": [r(x) for x in versus("serve", f"serve_without_{variant}")],
                }
                for variant in VARIANTS
            },
            "serve": side("serve"),
        }
    if alternatives:
        result["servers"] = {name: {**side(name), "vs_gunicorn_sync": r(median(versus(name)))} for name in sides}
        result["servers_not_installed"] = missing
    return result


def pg_connections(db: Database) -> int:
    import psycopg

    with psycopg.connect(db.url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [db.name]).fetchone()[0]


def bench_soak(tmp: Path, db: Database, quick: bool) -> dict:
    import requests

    clients, seconds, warmup = (50, 15.0, 5.0) if quick else (200, 60.0, 15.0)
    pool_max, processes = 8, 2
    env = service_env(tmp, db, AIRLOCK_DB_POOL={"max": pool_max}, AIRLOCK_SERVE={"web_processes": processes})
    migrate(env)
    tokens = [createuser(env, f"soak{i}") for i in range(10)]
    server = serve(env, tmp)
    image = small_jpeg(seed=3)
    statuses: dict[int, int] = {}
    lock = threading.Lock()
    stop = threading.Event()
    conns: list[int] = []
    rss: list[float] = []

    def count(status: int) -> None:
        with lock:
            statuses[status] = statuses.get(status, 0) + 1

    def client(n: int) -> None:
        session = requests.Session()
        session.headers["Authorization"] = f"Token {tokens[n % len(tokens)]}"
        while not stop.is_set():
            try:
                intent = session.post(
                    f"{server.base}/api/v1/uploads",
                    timeout=60,
                    json={"profile": "image", "filename": "s.jpg", "size": len(image), "content_type": "image/jpeg"},
                )
                count(intent.status_code)
                if intent.status_code != 201:
                    time.sleep(1.0)
                    continue
                body = intent.json()
                put = requests.put(
                    body["upload"]["url"], data=image, headers={"Content-Type": "image/jpeg"}, timeout=60
                )
                count(put.status_code)
                url = f"{server.base}/api/v1/attachments/{body['id']}"
                count(session.get(url, timeout=60).status_code)
                waited = session.get(f"{url}?wait=2", timeout=60)
                count(waited.status_code)
                if waited.ok and waited.json()["status"] == "ready":
                    count(session.get(f"{url}/download", timeout=60).status_code)
            except requests.RequestException:
                count(0)  # no answer at all counts against the server too

    warmed = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            conns.append(pg_connections(db))
            if warmed.is_set():  # RSS from after the warm-up (threads, pools, the sandbox's spares start)
                rss.append(rss_mb(server.proc.pid))
            stop.wait(0.25)

    try:
        threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
        sampler = threading.Thread(target=sample)
        sampler.start()
        for thread in threads:
            thread.start()
        time.sleep(warmup)
        warmed.set()
        time.sleep(seconds)
        stop.set()
        for thread in threads:
            thread.join(90)
        sampler.join(10)
        conns.append(pg_connections(db))
    finally:
        server.stop()
    quarter = max(1, len(rss) // 4)
    growth = (sum(rss[-quarter:]) / quarter) / (sum(rss[:quarter]) / quarter) - 1
    bound = processes * (pool_max + 1) + pool_max
    bad = sum(n for status, n in statuses.items() if status >= 500 or status == 0)
    return {
        "soak": {
            "responses_5xx": bad,
            "responses": sum(statuses.values()),
            "statuses": {str(k): v for k, v in sorted(statuses.items())},
            "pg_connections_peak": max(conns),
            "pg_connections_bound": bound,
            "pg_connections_within_bound": max(conns) <= bound,
            "rss_growth_pct": r(growth * 100, 1),
            "rss_mb_first_quarter": r(sum(rss[:quarter]) / quarter, 1),
            "rss_mb_last_quarter": r(sum(rss[-quarter:]) / quarter, 1),
            "clients": clients,
            "seconds": seconds,
            "warmup_seconds": warmup,
            "setup": f"serve on PostgreSQL + Redis, {processes} web processes + job process, "
            f"AIRLOCK_DB_POOL=max={pool_max}",
        }
    }


def bench_waiters(tmp: Path, db: Database, redis: bool, quick: bool) -> dict:
    import requests

    wait = 30  # the figure's own definition, in --quick too
    env = service_env(tmp, db, redis=redis)
    migrate(env)
    tokens = [createuser(env, f"waiter{i}") for i in range(5)]
    server = serve(env, tmp)
    try:
        pending = []
        for token in tokens:
            for _ in range(20):
                got = requests.post(
                    f"{server.base}/api/v1/uploads",
                    headers={"Authorization": f"Token {token}"},
                    timeout=30,
                    json={"profile": "image", "filename": "w.jpg", "size": 10, "content_type": "image/jpeg"},
                )
                pending.append((token, got.json()["id"]))
        time.sleep(2.0)  # let start-up work settle
        # What the server spends with nobody waiting (scheduler ticks, idle consumers), per second.
        idle_seconds = 10.0
        before = cpu_seconds(server.proc.pid)
        time.sleep(idle_seconds)
        idle_rate = (cpu_seconds(server.proc.pid) - before) / idle_seconds
        statuses: list[int] = []

        def waiter(token: str, pk: str) -> None:
            got = requests.get(
                f"{server.base}/api/v1/attachments/{pk}?wait={wait}",
                headers={"Authorization": f"Token {token}"},
                timeout=wait + 30,
            )
            statuses.append(got.status_code)

        before = cpu_seconds(server.proc.pid)
        started = time.monotonic()
        threads = [threading.Thread(target=waiter, args=item) for item in pending]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(wait + 60)
        elapsed = time.monotonic() - started
        spent = cpu_seconds(server.proc.pid) - before
    finally:
        server.stop()
    on_waiters = max(0.0, spent - idle_rate * elapsed)
    return {
        "waiters_cpu_s_per_100x30s": r(on_waiters * 30.0 / elapsed, 2),
        "waiters": {
            "cpu_s_total": r(spent, 2),
            "cpu_s_idle_same_time": r(idle_rate * elapsed, 2),
            "seconds": r(elapsed, 1),
            "wait": wait,
            "answered_200": statuses.count(200),
            "statuses": sorted(set(statuses)),
            "setup": f"serve (web + worker + scheduler), {'PostgreSQL' if db.pg else 'SQLite'}, "
            f"redis={redis}; 100 waiters (5 users x 20) on pending intents",
        },
    }


class SqliteDatabase:
    """The embedded default's database (SQLite in tmp), beside bench.api.Database's PostgreSQL one."""

    pg = False

    def __init__(self, tmp: Path) -> None:
        self.url = f"sqlite:///{tmp / 'bench.sqlite3'}"

    def drop(self) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--only",
        default="ratio,soak,waiters",
        help="any of ratio, soak, waiters, servers (ratio plus granian and waitress, when installed),"
        " variants (ratio plus serve in one web process, and plain gunicorn gthread)",
    )
    args = parser.parse_args()
    chosen = args.only.split(",")
    redis = redis_ok()
    result: dict = {}
    for name in ("ratio", "servers", "variants", "soak", "waiters"):
        if name not in chosen:
            continue
        tmp = scratch_dir(f"airlock-bench-serve-{name}-")
        db = Database(tmp)
        try:
            if name in ("ratio", "servers", "variants"):
                # On PostgreSQL (when it answers) and on the embedded default (SQLite, the in-process broker).
                result.update(
                    bench_ratio(tmp, db, redis, args.quick, alternatives=name == "servers", variants=name == "variants")
                )
                if db.pg:
                    embedded = scratch_dir(f"airlock-bench-serve-{name}-embedded-")
                    result.update(
                        bench_ratio(embedded, SqliteDatabase(embedded), False, args.quick, variants=name == "variants")
                    )
            elif name == "soak":
                if not (db.pg and redis):
                    raise RuntimeError("the soak needs PostgreSQL and Redis")
                result.update(bench_soak(tmp, db, args.quick))
            else:
                result.update(bench_waiters(tmp, db, redis, args.quick))
        finally:
            db.drop()
    emit(result)


if __name__ == "__main__":
    main()
