#!/usr/bin/env python
"""Redis commands per photo, on a Redis of this bench's own, by command and by who sends them.

    python bench/redis_bench.py [--quick] [--photos N] [--quiet-seconds S]

Starts a private `redis-server` on a free loopback port, points REDIS_URL at
it, sets Django up (DATABASE_URL if set, else SQLite in AIRLOCK_DATA_DIR) and
starts the same in-process worker `manage.py serve` runs (ops/runtime.py: the
Dramatiq worker on the Redis broker, its heartbeat, the tenant slots). Then,
with MONITOR recording every command the server runs:

1. a quiet interval (S seconds, the worker running, no file): the idle rate;
2. N photos one after another, each through the intent and PUT services and
   the worker's stages until it is ready.

Per photo = (commands in the photos' interval − idle rate × its length) ÷ N.
`redis_commands_per_photo` counts the commands clients send (one EVALSHA is
one command and one round trip, however many commands its script runs);
`redis_commands_executed_per_photo` what INFO's total_commands_processed
counts: those a Lua script runs too. Each
command is put down to its sender: Dramatiq's broker (enqueue, fetch, ack;
a fetch that found nothing is polling), the tenant slots, the worker
liveness registry, the status-change announcement (`?wait=`), rate limits.
The scheduler's tick is not in either interval: its cost per tick is reported
apart (it runs every AIRLOCK_TICK_SECONDS per scheduler, whatever the traffic).

The count does not depend on the photo's size: 2000×1500 JPEGs keep it quick.
Prints one JSON line; `redis_commands_per_photo` is the figure (goal <= 30).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import REPO, free_port, photo_jpeg, r, with_group_keys  # noqa: E402


class PrivateRedis:
    """A redis-server of our own: nobody else's commands in its counts."""

    def __init__(self, directory: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.log = open(directory / "redis.log", "ab")
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            cwd=directory,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        import redis

        client = redis.Redis.from_url(self.url, socket_connect_timeout=1)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except redis.exceptions.ConnectionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("the private redis-server did not start") from None
                time.sleep(0.05)
        client.close()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class Monitor(threading.Thread):
    """Every command the server runs, as (server time, "tcp" or "lua", [command, args...])."""

    def __init__(self, url: str) -> None:
        super().__init__(name="redis-monitor", daemon=True)
        import redis

        self._client = redis.Redis.from_url(url, socket_timeout=None)
        self._monitor = self._client.monitor()
        self._monitor.__enter__()  # MONITOR is on before start() returns: nothing is missed
        self.lines: list[tuple[float, str, list[str]]] = []
        self.unparsed: list[str] = []
        self._lock = threading.Lock()

    def run(self) -> None:
        import redis

        while True:
            try:
                item = self._monitor.next_command()
            except redis.exceptions.TimeoutError:
                continue  # seconds without a command: an idle worker now sends few
            except (redis.exceptions.ConnectionError, OSError):
                return  # stop() closed the connection
            except Exception as exc:  # noqa: BLE001 - a line redis-py could not parse: counted, not fatal
                self.unparsed.append(repr(exc)[:200])
                continue
            if item is None:
                continue
            words = _split(item["command"])
            with self._lock:
                self.lines.append((float(item["time"]), item.get("client_type") or "tcp", words))

    def between(self, start: float, end: float) -> list[tuple[float, str, list[str]]]:
        with self._lock:
            return [line for line in self.lines if start <= line[0] < end]

    def stop(self) -> None:
        try:
            self._monitor.connection.disconnect()
        except Exception:  # noqa: BLE001 - the thread ends either way
            pass


def _split(command: str) -> list[str]:
    """redis-py gives MONITOR's command as one string of quoted words: split it back."""
    import shlex

    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def known_scripts() -> dict[str, str]:
    """sha1 of every Lua script we or Dramatiq load -> a name for it."""
    from dramatiq.brokers.redis import _scripts as dramatiq_scripts

    from processing import tenant_slots

    found = {hashlib.sha1(source).hexdigest(): f"dramatiq.{name}" for name, source in dramatiq_scripts.items()}
    for name in dir(tenant_slots):
        value = getattr(tenant_slots, name)
        if isinstance(value, str) and "redis.call" in value:
            found[hashlib.sha1(value.encode()).hexdigest()] = f"slots.{name.strip('_').lower()}"
    from attachments.services import ratelimits

    found[hashlib.sha1(ratelimits._COUNT_INTENT.encode()).hexdigest()] = "ratelimit"
    try:
        from processing import broker as airlock_broker

        for name, source in airlock_broker.SCRIPTS.items():
            found[hashlib.sha1(source.encode()).hexdigest()] = f"dramatiq.{name}"
    except (ImportError, AttributeError):
        pass
    return found


def source_of(words: list[str], scripts: dict[str, str], prefix: str) -> str:
    """Who sent a client command: dramatiq.<command>, slots.<script>, liveness, waiting, ratelimit, ..."""
    if not words:
        return "other"
    name = words[0].lower()
    if name in ("evalsha", "eval"):
        script = scripts.get(words[1], "script") if name == "evalsha" else "eval"
        if script == "dramatiq.dispatch" and len(words) > 4:
            return f"dramatiq.{words[4]}"
        return script
    keys = " ".join(words[1:3])
    if name in ("blpop", "brpop") and ".bell" in keys:
        return "dramatiq.doorbell"
    if name == "publish":
        return "waiting.publish"
    if name == "time" or f"{prefix}-workers" in keys:
        return "liveness"
    if "broker-epoch" in keys:
        return "broker_epoch"
    if ":intents:" in keys:
        return "ratelimit"
    if name == "ping":
        return "readiness"
    if name in ("client", "hello", "select", "script"):
        return "connection"
    if "-slots-" in keys or "-waiting-" in keys:
        return "slots"
    if name == "scan":
        return "scan"
    return f"other.{name}"


# Senders whose commands follow the clock, not the files: a worker's beat, a connection opened.
TIME_BASED = ("liveness", "connection")


def tally(lines: list[tuple[float, str, list[str]]], scripts: dict[str, str], prefix: str) -> dict[str, Counter]:
    """Counts by command name and by sender: sent by clients, and executed (a script's commands under its sender).

    An idle consumer's wait that ran out (a BLPOP on its bell, then a fetch that
    found nothing and was not followed by a DEL of the bell) is idle polling,
    not any file's: those pairs are counted apart ("idle_waits") and left out of
    the four counts, as are the TIME_BASED senders' commands. A fetch that found
    nothing after a stale token (the DEL follows it) is a file's cost and stays in.
    """
    groups: list[tuple[str, list[str], list[str]]] = []  # (sender, client command, its script's commands)
    for _, kind, words in lines:
        if not words or words[0].lower() == "monitor":
            continue
        if kind == "lua":
            if groups:
                groups[-1][2].append(words[0].lower())
            continue
        groups.append((source_of(words, scripts, prefix), words, []))
    idle = [False] * len(groups)
    for i, (sender, words, inner) in enumerate(groups):
        if sender != "dramatiq.fetch" or "sadd" in inner or len(words) < 7:
            continue
        bell = f"{words[3]}:{words[6]}.bell"  # EVALSHA sha 1 <namespace> fetch <timestamp> <queue> ...
        if any(g[1][0].lower() == "del" and bell in g[1][1:] for g in groups[i + 1 : i + 40]):
            continue
        idle[i] = True
        for j in range(i + 1, len(groups)):  # the wait it goes back to: the next BLPOP on the same bell
            if not idle[j] and groups[j][0] == "dramatiq.doorbell" and bell in groups[j][1]:
                idle[j] = True
                break
    counts: dict[str, Counter] = {
        "sent_by_command": Counter(),
        "sent_by_source": Counter(),
        "executed_by_command": Counter(),
        "executed_by_source": Counter(),
        "idle_waits": Counter(),
        "time_based": Counter(),
    }
    for (sender, words, inner), waited in zip(groups, idle, strict=True):
        name = words[0].lower()
        if waited or sender in TIME_BASED:
            counts["idle_waits" if waited else "time_based"][sender] += 1
            continue
        counts["sent_by_command"][name] += 1
        counts["sent_by_source"][sender] += 1
        counts["executed_by_command"][name] += 1
        counts["executed_by_source"][sender] += 1 + len(inner)
        for inner_name in inner:
            counts["executed_by_command"][inner_name] += 1
    return counts


def per_photo(window: Counter, quiet: Counter, window_s: float, quiet_s: float, photos: int) -> dict[str, float]:
    out = {}
    for key in sorted(set(window) | set(quiet)):
        value = (window[key] - quiet[key] / quiet_s * window_s) / photos
        if abs(value) >= 0.05:
            out[key] = r(value, 1)
    return out


def run_ticks_cost(monitor: Monitor, scripts: dict[str, str], prefix: str) -> dict[str, object]:
    """One scheduler pass (relay, recovery, epoch, waiting rooms...): its Redis commands."""
    from ops.runtime import run_ticks_once

    run_ticks_once()  # the first may do one-off work (the epoch's first set)
    time.sleep(0.2)
    start = time.time()
    run_ticks_once()
    time.sleep(0.3)
    lines = monitor.between(start, time.time())
    counted = tally(lines, scripts, prefix)
    every = counted["sent_by_source"] + counted["idle_waits"] + counted["time_based"]
    return {"commands": sum(every.values()), "by_source": dict(every)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--photos", type=int, default=0, help="photos measured (default 8, quick 4)")
    parser.add_argument("--quiet-seconds", type=float, default=0, help="idle interval (default 20, quick 10)")
    parser.add_argument("--threads", type=int, default=4, help="worker threads")
    args = parser.parse_args()
    photos = args.photos or (4 if args.quick else 8)
    quiet_s = args.quiet_seconds or (10.0 if args.quick else 20.0)  # whole idle waits (10 s each by default)

    tmp = Path(os.environ.get("BENCH_TMP") or tempfile.mkdtemp(prefix="redis-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    server = PrivateRedis(tmp)
    prefix = f"rb{os.getpid()}"
    os.environ["REDIS_URL"] = server.url
    os.environ["AIRLOCK_KEY_PREFIX"] = prefix
    os.environ.setdefault("AIRLOCK_DATA_DIR", str(tmp / "data"))
    os.environ.setdefault("AIRLOCK_STORAGE_ROOT", str(tmp / "data" / "storage"))
    with_group_keys(os.environ, "AIRLOCK_RATE_LIMITS", intents_per_minute=10**9, pending_per_subject=10**9)
    worker = None
    monitor = None
    try:
        from bench.common import bench_django, make_user, sample_intent, signed_put

        bench_django()
        from django.conf import settings

        from attachments.models import Attachment
        from ops.runtime import start_worker
        from processing.stages import STAGES

        user = make_user("redisbench", "redisbench")
        item = {"path": Path("photo.jpg"), "profile": "image", "content_type": "image/jpeg"}
        files = [photo_jpeg(500 + i, (2000, 1500)) for i in range(photos + 1)]
        worker = start_worker(threads=args.threads)
        scripts = known_scripts()

        def one(data: bytes) -> None:
            intent = sample_intent(user, item, data)
            pk = intent.attachment.pk
            signed_put(pk, data)
            deadline = time.monotonic() + 120
            while Attachment.objects.filter(pk=pk).values_list("status", flat=True).first() != "ready":
                if time.monotonic() > deadline:
                    status = Attachment.objects.filter(pk=pk).values_list("status", "reason").first()
                    raise RuntimeError(f"photo not ready after 120 s: {status}")
                time.sleep(0.005)

        one(files[0])  # warm: scripts loaded, connections open, the sandbox's fork server up
        time.sleep(2.0)  # every consumer has asked once and waits
        monitor = Monitor(server.url)
        monitor.start()
        time.sleep(0.5)

        q0 = time.time()
        time.sleep(quiet_s)
        q1 = time.time()
        for data in files[1:]:
            one(data)
        time.sleep(0.5)  # the last stage's ack lands after the row is ready
        w1 = time.time()
        if not monitor.is_alive():
            raise RuntimeError("MONITOR stopped before the photos were through: the counts would be short")
        window_s, quiet_len = w1 - q1, q1 - q0
        quiet_lines, window_lines = monitor.between(q0, q1), monitor.between(q1, w1)
        quiet, window = tally(quiet_lines, scripts, prefix), tally(window_lines, scripts, prefix)
        ticks = run_ticks_cost(monitor, scripts, prefix)

        def photo(kind: str) -> dict[str, float]:
            return per_photo(window[kind], quiet[kind], window_s, quiet_len, photos)

        def total(kind: str) -> float | None:
            w, q = sum(window[kind].values()), sum(quiet[kind].values())
            return r((w - q / quiet_len * window_s) / photos, 1)

        result = {
            "redis_commands_per_photo": total("sent_by_command"),
            "redis_commands_executed_per_photo": total("executed_by_command"),
            # Everything the server ran while the photos went through, polling and beats included, ÷ photos.
            "redis_commands_per_photo_incl_polling": r(len([1 for _, k, _ in window_lines if k != "lua"]) / photos, 1),
            "redis_commands_executed_per_photo_incl_polling": r(len(window_lines) / photos, 1),
            "redis_commands_by_name_per_photo": photo("sent_by_command"),
            "redis_commands_by_sender_per_photo": photo("sent_by_source"),
            "redis_executed_by_name_per_photo": photo("executed_by_command"),
            "redis_executed_by_sender_per_photo": photo("executed_by_source"),
            "redis_idle_waits_in_photos_interval": sum(window["idle_waits"].values()),
            # The idle rate: the beat, and the waits that ran out.
            "redis_idle_commands_per_s": r(
                sum(sum(quiet[kind].values()) for kind in ("sent_by_command", "idle_waits", "time_based")) / quiet_len,
                2,
            ),
            "redis_idle_commands_by_sender_per_s": {
                k: r(v / quiet_len, 2)
                for k, v in sorted((quiet["sent_by_source"] + quiet["idle_waits"] + quiet["time_based"]).items())
            },
            # Idle consumers' waits that ran out (a BLPOP and a fetch each), per second of the quiet interval.
            "redis_idle_wait_commands_per_s": r(sum(quiet["idle_waits"].values()) / quiet_len, 2),
            "redis_monitor_unparsed": len(monitor.unparsed),
            "redis_tick_commands": ticks["commands"],
            "redis_tick_commands_by_sender": ticks["by_source"],
            "redis_bench": {
                "photos": photos,
                "photos_window_s": r(window_s, 2),
                "quiet_s": r(quiet_len, 2),
                "worker_threads": args.threads,
                "worker_poll_ms": settings.AIRLOCK_SERVE.worker_poll_ms,
                "broker": type(__import__("dramatiq").get_broker()).__module__,
                "stages": len(STAGES),
                "database": settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1],
                "load_average": os.getloadavg()[0],
            },
        }
        if os.environ.get("REDIS_BENCH_DUMP"):  # every command of both intervals, for a look by hand
            with open(os.environ["REDIS_BENCH_DUMP"], "w") as out:
                for when, kind, words in monitor.between(q0, w1):
                    label = "lua" if kind == "lua" else source_of(words, scripts, prefix)
                    out.write(f"{when:.4f} {'Q' if when < q1 else 'W'} {label:24} {' '.join(words)[:160]}\n")
        print(__import__("json").dumps(result), flush=True)
    finally:
        if monitor is not None:
            monitor.stop()
        if worker is not None:
            worker.stop(timeout=10_000)
        server.stop()


if __name__ == "__main__":
    os.chdir(REPO)
    main()
