#!/usr/bin/env python
"""Pipeline overhead: files/s through the whole pipeline against the bare steps, same files, same run.

    python bench/pipeline_overhead.py [--quick]      (bench/run.py runs it with a scratch AIRLOCK_DATA_DIR)

Pipeline (the headline, `pipeline_overhead_ratio`): the service as `manage.py
serve` runs it on the embedded defaults: the real Dramatiq worker in this
process (AIRLOCK_WORKER_THREADS threads, in-process broker, per-tenant derive
cap), SQLite and local storage in the scratch dir, the sandbox's fork server
and clamd. This thread plays the web server: for each file of a batch it
creates the intent and stores the signed PUT's body (the same service calls
the views make), back to back; files/s = batch size ÷ (first intent → last
file ready). Every file must end `ready`.
Bare: the same work called directly, one file after another, in one process:
sniff the first 4,100 bytes, scan with the same scanners, decode with the same
decoder function in-process (images.process / pdfs.process), with the zlib the
sandbox's jobs load (zlib-ng when built: the process re-executes itself with it);
no database, no storage, no sandbox, no queue. Rounds alternate pipeline/bare so background
load hits both. pipeline_overhead_ratio = pipeline time per file ÷ bare time
per file (lower is better).

Two more views of the same files, for honesty about where the time goes:
- serial (`pipeline_serial_*`): one file at a time, inline in one thread, each
  step called as its actor would (no queue, no concurrency), with the median
  time of every phase; this is latency, not throughput. Against two baselines,
  interleaved in the same rounds: the bare steps above
  (`pipeline_serial_overhead_ratio`, information) and the same bare steps with
  each decode sent to the sandbox as the derive step sends it, run_job: a child
  freshly forked from the fork server and confined before it reads the file,
  with the product's limits and archive-member rules
  (`pipeline_serial_overhead_vs_confined_ratio`, the goal): the pipeline's cost
  beyond the isolation it keeps.
- same parallelism (`pipeline_vs_bare_parallel_ratio`): the bare steps in as
  many processes as the machine has cores, against the pipeline above.

With --redis (bench/run.py's `pipeline` runs it after the embedded run, keys
suffixed `_redis`): DATABASE_URL and REDIS_URL point at a scratch PostgreSQL
database and Redis, and the service side is `manage.py rundramatiq --processes
2` (--processes, --threads) in its own processes instead of serve's in-process
worker; the bare sides and the serial view are the same.
With --redis --scaling: only the service side, with 1, 2, … N worker processes
(N = cores, or --max-processes), files/s and efficiency (files/s ÷ (k × the
one-process files/s)) per k.
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    bench_django,
    emit,
    inflate_like_the_sandbox,
    make_user,
    median,
    r,
    sample_intent,
    sample_mix,
    scratch_dir,
    signed_put,
    stop_process,
    timed,
    zlib_versions,
)

_BARE: dict = {}
REPO = Path(__file__).resolve().parent.parent


class RedisWorker:
    """`manage.py rundramatiq` in its own processes (the PostgreSQL + Redis deployment's worker)."""

    def __init__(self, processes: int, threads: int, log: Path) -> None:
        self.log = open(log, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "rundramatiq", "--processes", str(processes), "--threads", str(threads)],
            cwd=REPO,
            env=os.environ.copy(),
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def stop(self) -> None:
        stop_process(self.proc)
        self.log.close()


def _bare_worker_init() -> None:
    """A process of the same-parallelism baseline: Django set up, scanners and bounds ready."""
    bench_django()
    from django.conf import settings

    from processing.sandbox import Bounds
    from processing.scanners import scanners_from_settings

    _BARE["scanners"] = scanners_from_settings()
    _BARE["bounds"] = Bounds(
        max_pixels=settings.AIRLOCK_DECODE_LIMITS.pixels,
        max_pdf_pages=settings.AIRLOCK_DECODE_LIMITS.pdf_pages,
        max_text_chars=settings.AIRLOCK_DECODE_LIMITS.text_chars,
    )


def decoder_kind(profile: str) -> str:
    """The sandbox job kind that decodes a file of the mix's profile."""
    return "image" if profile == "image" else "pdf"


def decode_confined(path: Path, profile: str, work: Path, bounds) -> None:
    """One decode as the derive step sends it: a run_job, i.e. a fresh child of the fork server,
    confined before it reads the file, with the limits and archive-member rules the product passes."""
    from processing import sandbox_config
    from processing.sandbox import run_job

    kind = decoder_kind(profile)
    result = run_job(
        kind,
        path,
        work,
        limits=sandbox_config.limits_for(kind, path),
        bounds=bounds,
        member_rules=sandbox_config.member_rules_dir(),  # as the pipeline's: no fork server swapped between sides
    )
    assert result.outcome == "ok", (path.name, result.reason_code, result.message)


def bare_steps(path: Path, profile: str, scratch: Path, scanners=None, bounds=None, *, confined: bool = False) -> None:
    """Sniff + scan + decode, called directly: what the pipeline does minus the pipeline.

    confined: decode in a sandbox job (decode_confined) instead of in this process.
    """
    from processing.sandbox import images as image_decoder
    from processing.sandbox import pdfs as pdf_decoder
    from processing.scanners import scan_all
    from processing.sniff import detect_type

    scanners = scanners if scanners is not None else _BARE["scanners"]
    bounds = bounds if bounds is not None else _BARE["bounds"]
    with open(path, "rb") as fh:
        detect_type(fh.read(4100))

    def chunks():
        with open(path, "rb") as fh:
            yield from iter(lambda: fh.read(65536), b"")  # the gateway's chunk size

    assert all(v.outcome == "clean" for v in scan_all(scanners, chunks))
    work = scratch / uuid.uuid4().hex
    work.mkdir(parents=True)
    if confined:
        decode_confined(path, profile, work, bounds)
    else:
        (image_decoder if profile == "image" else pdf_decoder).process(path, work, bounds)


def make_service_batch(submit, payloads: list, reps: int):
    """One batch through the running worker: submit every file back to back, wait until all are ready; files/s."""

    def service_batch() -> float:
        from attachments.models import Attachment

        started = time.perf_counter()
        pks = [submit(item, data) for _ in range(reps) for item, data in payloads]
        deadline = time.monotonic() + 300
        while Attachment.objects.filter(pk__in=pks, status__in=("pending", "processing")).exists():
            if time.monotonic() > deadline:
                raise RuntimeError("the pipeline did not finish the batch in 300 s")
            time.sleep(0.005)
        took = time.perf_counter() - started
        statuses = set(Attachment.objects.filter(pk__in=pks).values_list("status", flat=True))
        assert statuses == {"ready"}, statuses
        return len(pks) / took

    return service_batch


def scaling(service_batch, *, threads: int, log: Path, rounds: int, most: int, files: int) -> dict:
    """files/s with 1, 2, … `most` rundramatiq processes; efficiency against k × the one-process rate."""
    import redis
    from django.conf import settings

    server = redis.Redis.from_url(settings.REDIS_URL)

    def commands() -> int:
        return int(server.info("stats")["total_commands_processed"])

    from bench.capacity import tree_cpu_s

    per_k: dict[int, float] = {}
    worker_cpu_ms: dict[int, list[float]] = {}
    redis_per_file: list[float] = []
    for k in range(1, most + 1):
        worker = RedisWorker(k, threads, log)
        try:
            service_batch()  # warm-up: the processes start, import, connect, fork their sandboxes
            runs = []
            for _ in range(rounds):
                before, cpu = commands(), tree_cpu_s(worker.proc.pid)
                runs.append(service_batch())
                redis_per_file.append((commands() - before - 2) / files)  # less the two INFO calls
                worker_cpu_ms.setdefault(k, []).append((tree_cpu_s(worker.proc.pid) - cpu) * 1000 / files)
            per_k[k] = median(runs)
        finally:
            worker.stop()
    one = per_k[1]
    return {
        # The whole Redis server's count: on a shared Redis it includes everyone else's commands.
        "scaling_redis_commands_per_file_median": r(median(redis_per_file), 1),
        "scaling_redis_commands_per_file_min": r(min(redis_per_file), 1),
        "scaling_files_per_s": {str(k): r(v) for k, v in per_k.items()},
        "scaling_efficiency": {str(k): r(v / (k * one)) for k, v in per_k.items()},
        # rundramatiq's processes and their sandboxes, per file: the worker fleet's cost under real concurrency.
        "scaling_worker_cpu_ms_per_file": {str(k): r(median(v), 1) for k, v in worker_cpu_ms.items()},
        "scaling_files_per_s_per_process": {str(k): r(v / k) for k, v in per_k.items()},
        "scaling_threads_per_process": threads,
        "scaling_batch_files": files,
        "scaling_rounds": rounds,
        "scaling_cores": os.cpu_count(),
        "scaling_database": settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1],
        "scaling_mode": (
            "rundramatiq --processes k on PostgreSQL + Redis; files submitted back to back through "
            "the intent and PUT services from this process; median of rounds after a warm-up batch"
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--redis",
        action="store_true",
        help="service side = rundramatiq processes on PostgreSQL + Redis (DATABASE_URL, REDIS_URL)",
    )
    parser.add_argument("--processes", type=int, default=2, help="rundramatiq --processes (with --redis)")
    parser.add_argument(
        "--threads", type=int, default=0, help="rundramatiq --threads (with --redis; default AIRLOCK_WORKER_THREADS)"
    )
    parser.add_argument(
        "--scaling",
        action="store_true",
        help="with --redis: only the service side, 1..N worker processes, files/s and efficiency",
    )
    parser.add_argument("--max-processes", type=int, default=0, help="N for --scaling (default: cores)")
    args = parser.parse_args()
    if (args.redis or args.scaling) and not (os.environ.get("REDIS_URL") and os.environ.get("DATABASE_URL")):
        parser.error("--redis and --scaling need DATABASE_URL (PostgreSQL) and REDIS_URL")
    inflate_like_the_sandbox()  # the bare steps decode with the sandbox's zlib
    bench_django()

    from django.conf import settings

    from attachments.models import Attachment
    from ops.runtime import start_worker
    from processing import pipeline
    from processing.sandbox import Bounds, shutdown
    from processing.sandbox.runner import confinement
    from processing.scanners import scanners_from_settings

    rounds = 3 if args.quick else 5
    batch_reps = 4 if args.quick else 6  # files per batch = reps x mix
    tmp = scratch_dir("airlock-bench-pipe-")
    mix = sample_mix(
        tmp / "mix", photos=2 if args.quick else 4, screenshots=2 if args.quick else 4, pdfs=1 if args.quick else 2
    )
    payloads = [(item, item["path"].read_bytes()) for item in mix]
    user = make_user()
    scanners = scanners_from_settings()
    bounds = Bounds(
        max_pixels=settings.AIRLOCK_DECODE_LIMITS.pixels,
        max_pdf_pages=settings.AIRLOCK_DECODE_LIMITS.pdf_pages,
        max_text_chars=settings.AIRLOCK_DECODE_LIMITS.text_chars,
    )

    def bare(item: dict) -> None:
        bare_steps(item["path"], item["profile"], tmp / "bare", scanners, bounds)

    def bare_confined(item: dict) -> None:
        bare_steps(item["path"], item["profile"], tmp / "bare-confined", scanners, bounds, confined=True)

    def submit(item: dict, data: bytes):
        """What the intent view and the signed-PUT view do for one file."""
        intent = sample_intent(user, item, data)
        pk = intent.attachment.pk
        signed_put(pk, data)
        return pk

    threads = args.threads or settings.AIRLOCK_CONCURRENCY.worker_threads
    worker_log = tmp / "rundramatiq.log"
    if args.scaling:
        emit(
            scaling(
                make_service_batch(submit, payloads, batch_reps),
                threads=threads,
                log=worker_log,
                rounds=rounds,
                most=args.max_processes or os.cpu_count() or 1,
                files=batch_reps * len(payloads),
            )
        )
        return

    # --- serial: one file at a time, each step called inline (latency per phase) ---
    phases: dict[str, list[float]] = {}

    import processing.sandbox_config as sandbox_config

    real_sandboxed = sandbox_config.run_sandboxed

    def sandboxed(*a):
        started = time.perf_counter()
        try:
            return real_sandboxed(*a)
        finally:
            phases.setdefault("derive_sandbox_job", []).append(time.perf_counter() - started)

    def mark(name: str, started: float) -> float:
        now = time.perf_counter()
        phases.setdefault(name, []).append(now - started)
        return now

    def serial_pipeline(item: dict, data: bytes) -> None:
        t = time.perf_counter()
        intent = sample_intent(user, item, data)
        pk = intent.attachment.pk
        t = mark("intent", t)
        signed_put(pk, data)
        t = mark("put", t)
        pipeline.start_and_intake(pk)
        t = mark("intake", t)
        for _ in range(4):
            row = Attachment.objects.only("status", "lease_token", "step").get(pk=pk)
            if row.status != "processing":
                break
            pipeline.run_stage(pk, row.lease_token, row.step)
            t = mark(row.step, t)
        status = Attachment.objects.filter(pk=pk).values_list("status", flat=True).get()
        assert status == "ready", (item["path"].name, status)

    def flush_broker() -> None:
        import dramatiq

        dramatiq.get_broker().flush_all()  # nobody consumes the in-process broker's doorbells here

    sandbox_config.run_sandboxed = sandboxed
    for item, data in payloads:  # warm-up: imports, the sandbox's fork server, scanner rules
        serial_pipeline(item, data)
        bare(item)
        bare_confined(item)
    flush_broker()
    phases.clear()
    serial_ratios: list[float] = []
    confined_ratios: list[float] = []
    per_kind: dict[str, dict[str, list[float]]] = {}
    serial_sides = {
        "pipeline": lambda item, data: serial_pipeline(item, data),
        "bare": lambda item, data: bare(item),
        "confined": lambda item, data: bare_confined(item),
    }
    for n in range(rounds):
        times = dict.fromkeys(serial_sides, 0.0)
        for side in list(serial_sides)[:: 1 if n % 2 == 0 else -1]:
            for item, data in payloads:
                took = timed(lambda: serial_sides[side](item, data))
                times[side] += took
                per_kind.setdefault(item["kind"], {s: [] for s in serial_sides})[side].append(took)
        flush_broker()
        serial_ratios.append(times["pipeline"] / times["bare"])
        confined_ratios.append(times["pipeline"] / times["confined"])
    sandbox_config.run_sandboxed = real_sandboxed
    sandbox_confinement = confinement()  # the layers every job had, the confined baseline's included

    # --- service: the worker's threads take the files as they arrive (throughput) ---
    worker = RedisWorker(args.processes, threads, worker_log) if args.redis else start_worker()
    service_batch = make_service_batch(submit, payloads, batch_reps)

    def bare_batch() -> float:
        files = [item for _ in range(batch_reps) for item, _ in payloads]
        return len(files) / timed(lambda: [bare(item) for item in files])

    cores = os.cpu_count() or 1
    # Spawned, not forked: a fork of this process (worker threads, open SQLite connections)
    # inherited a held SQLite lock and hung in its first query.
    pool = ProcessPoolExecutor(
        max_workers=cores, initializer=_bare_worker_init, mp_context=multiprocessing.get_context("spawn")
    )

    def bare_parallel_batch() -> float:
        files = [item for _ in range(batch_reps) for item, _ in payloads]

        def run_all() -> None:
            for future in [pool.submit(bare_steps, i["path"], i["profile"], tmp / "bare-par") for i in files]:
                future.result()

        return len(files) / timed(run_all)

    service_batch()  # warm-up: worker threads, connections
    bare_parallel_batch()  # warm-up: the pool's processes
    service_fps, bare_fps, parallel_fps, ratios, parallel_ratios = [], [], [], [], []
    for n in range(rounds):
        sides = ["service", "bare", "parallel"]
        if n % 2:
            sides.reverse()
        got = {
            side: {"service": service_batch, "bare": bare_batch, "parallel": bare_parallel_batch}[side]()
            for side in sides
        }
        service_fps.append(got["service"])
        bare_fps.append(got["bare"])
        parallel_fps.append(got["parallel"])
        ratios.append(got["bare"] / got["service"])
        parallel_ratios.append(got["parallel"] / got["service"])
    worker.stop()
    pool.shutdown()
    shutdown()
    emit(
        {
            "pipeline_overhead_ratio": r(median(ratios)),
            "pipeline_overhead_ratio_runs": [r(x) for x in ratios],
            "pipeline_files_per_s": r(median(service_fps)),
            "bare_steps_files_per_s": r(median(bare_fps)),
            "pipeline_vs_bare_parallel_ratio": r(median(parallel_ratios)),
            "bare_steps_parallel_files_per_s": r(median(parallel_fps)),
            "bare_steps_parallel_processes": cores,
            "pipeline_batch_files": batch_reps * len(mix),
            "pipeline_worker_threads": settings.AIRLOCK_CONCURRENCY.worker_threads,
            "pipeline_tenant_concurrency": settings.AIRLOCK_CONCURRENCY.tenant,
            "pipeline_serial_overhead_ratio": r(median(serial_ratios)),
            "pipeline_serial_overhead_ratio_runs": [r(x) for x in serial_ratios],
            "pipeline_serial_overhead_vs_confined_ratio": r(median(confined_ratios)),
            "pipeline_serial_overhead_vs_confined_ratio_runs": [r(x) for x in confined_ratios],
            "pipeline_serial_by_kind": {
                kind: {
                    "pipeline_ms": r(median(v["pipeline"]) * 1000, 1),
                    "bare_ms": r(median(v["bare"]) * 1000, 1),
                    "bare_confined_ms": r(median(v["confined"]) * 1000, 1),
                    "ratio": r(median(v["pipeline"]) / median(v["bare"])),
                    "ratio_vs_confined": r(median(v["pipeline"]) / median(v["confined"])),
                }
                for kind, v in per_kind.items()
            },
            "pipeline_sandbox_confinement": sandbox_confinement,
            "pipeline_serial_phase_ms_median": {k: r(median(v) * 1000, 1) for k, v in phases.items()},
            "pipeline_mix": {kind: sum(1 for m in mix if m["kind"] == kind) for kind in per_kind},
            "pipeline_mode": (
                f"rundramatiq --processes {args.processes} --threads {threads} on PostgreSQL + Redis, "
                "files submitted back to back through the intent and PUT services; bare = same steps, "
                "one process, one file at a time"
            )
            if args.redis
            else (
                f"manage.py serve's worker in-process ({settings.AIRLOCK_CONCURRENCY.worker_threads} threads, "
                "in-process broker, per-tenant cap), files submitted back to back through the intent and PUT "
                "services; embedded SQLite + local storage in a scratch dir; bare = same steps, one "
                "process, one file at a time"
            ),
            "pipeline_scanners": [s.name for s in scanners],
            "pipeline_rounds": rounds,
            "pipeline_zlib": zlib_versions(),
        }
    )


if __name__ == "__main__":
    main()
