#!/usr/bin/env python
"""The background rescan's rate, and status reads while it runs (issue #28 "Prove it").

    python bench/rescan_bench.py [--quick] [--budget FILES_PER_MINUTE]

On the API bench's scratch database (bench/api.py: PostgreSQL when it answers,
else SQLite) with YARA as the only scanner (the embedded default without clamd):

1. `--setup N` (a child process): N ready photos, rows and stored objects, whose
   verdict is from an older signature version. It times `rescan_one` on a slice
   of them, one after the other, with nothing else running: the unbudgeted rate
   of the job (`rescan_files_per_s`), then marks them outdated again.
2. gunicorn serves the API (bench/api_setup.py's users and rows); the status read
   against the bare SELECT, alternating, as bench/api.py measures
   `api_status_vs_bare_select_ratio`: first idle, then while
3. `--walk` (a child process) runs the real job side of `manage.py serve`
   (ops/runtime.JobRuntime: scheduler ticks every second, rescan_tick within
   AIRLOCK_RATE_LIMITS=rescan_files_per_minute=--budget, the rescan actor on the in-process
   broker) until told to stop; it reports how many files it rescanned and when.
   Achieved rate = files rescanned ÷ (stop − walk start), against the budget.
N is large enough that the walk is still running when the reads end (checked).
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.api import drive, prepare, scratch_database, status_pair  # noqa: E402
from bench.common import (  # noqa: E402
    REPO,
    Gunicorn,
    bench_django,
    emit,
    median,
    r,
    scratch_dir,
    small_jpeg,
    with_group_keys,
)

OUTDATED = "bench:signatures-before"
TIMED_SLICE = 200  # files rescanned back to back for the unbudgeted rate
TICK_SECONDS = "1"


def setup(n: int) -> None:
    """Make n outdated ready photos with their objects; time rescan_one on a slice; print the facts."""
    bench_django("bench.settings")
    from django.db import connection
    from django.utils import timezone

    from attachments.models import Attachment, Status, Tenant
    from attachments.storage import get_gateway
    from processing.rescan.jobs import rescan_one, signatures_in_force

    owner = (Attachment.objects.filter(status=Status.READY).select_related("owner").first()).owner
    tenant = Tenant.objects.get(slug="bench")
    photo = small_jpeg(seed=7)
    gateway = get_gateway()
    now = timezone.now()
    rows = []
    for i in range(n):
        pk = uuid.uuid4()
        key = f"bench/rescan/{pk}"
        gateway.write_chunks(key, [photo], content_type="image/jpeg")
        rows.append(
            Attachment(
                id=pk,
                tenant=tenant,
                owner=owner,
                profile="image",
                status=Status.READY,
                filename=f"rescan-{i}.jpg",
                declared_size=len(photo),
                declared_type="image/jpeg",
                storage_key=key,
                served_key=key,
                size=len(photo),
                content_type="image/jpeg",
                created_at=now - timedelta(days=1, seconds=i),
                uploaded_at=now,
                ready_at=now,
                scanned_at=now,
                scan_signatures=OUTDATED,
                expires_at=now + timedelta(days=7),
            )
        )
    Attachment.objects.bulk_create(rows, batch_size=500)
    ids = [row.pk for row in rows]
    # The API bench's rows have no objects: current, so the walk rescans only the files made here.
    Attachment.objects.exclude(pk__in=ids).update(scan_signatures=signatures_in_force())

    timed = ids[: min(TIMED_SLICE, n)]
    start = time.perf_counter()
    outcomes = [rescan_one(pk) for pk in timed]
    seconds = time.perf_counter() - start
    if set(outcomes) != {"clean"}:
        raise RuntimeError(f"rescan_one outcomes: {sorted(set(outcomes))}")
    Attachment.objects.filter(pk__in=timed).update(scan_signatures=OUTDATED)  # outdated again, for the walk
    emit(
        {
            "files": n,
            "timed_files": len(timed),
            "timed_seconds": seconds,
            "signatures": signatures_in_force(),
            "photo_bytes": len(photo),
            "database": connection.vendor,
        }
    )


def walk(stop_file: Path) -> None:
    """Run the job side of serve (scheduler + worker) until stop_file exists; print what the walk did."""
    bench_django("bench.settings")
    from django.utils import timezone

    from attachments.models import Attachment, RescanCheckpoint, TransitionLog
    from ops.runtime import JobRuntime

    runtime = JobRuntime(worker=True, scheduler=True)
    runtime.start()
    print("walking", flush=True)  # the parent starts its reads on this line
    try:
        while not stop_file.exists():
            time.sleep(0.1)
        stopped = timezone.now()
    finally:
        runtime.stop()
    checkpoint = RescanCheckpoint.objects.get(pk=RescanCheckpoint.SINGLETON_PK)
    done = TransitionLog.objects.filter(
        transition="rescan", created_at__gte=checkpoint.started_at, created_at__lte=stopped
    )
    last = done.order_by("-created_at").values_list("created_at", flat=True).first()
    finished = checkpoint.finished_at is not None and checkpoint.finished_at <= stopped
    end = last if finished and last else stopped
    emit(
        {
            "rescanned": done.count(),
            "walk_seconds": (end - checkpoint.started_at).total_seconds(),
            "walk_finished_before_stop": finished,
            "queued": checkpoint.queued,
            "outdated_left": Attachment.objects.filter(scan_signatures=OUTDATED).count(),
        }
    )


def alternate(base: str, tmp: Path, pair: tuple[dict, dict], *, runs: int, seconds: float) -> list[float]:
    """requests/s ours ÷ bare per run, the two sides alternating which goes first (as bench/api.py does)."""
    ours, bare = pair
    ratios = []
    for n in range(runs):
        if n % 2 == 0:
            o, b = drive(base, tmp, seconds=seconds, **ours), drive(base, tmp, seconds=seconds, **bare)
        else:
            b, o = drive(base, tmp, seconds=seconds, **bare), drive(base, tmp, seconds=seconds, **ours)
        ratios.append(o["rps"] / b["rps"])
    return ratios


def child(args: list[str], env: dict[str, str], timeout: float) -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{args[0]} failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--budget", type=int, default=1200, help="AIRLOCK_RATE_LIMITS rescan_files_per_minute for the walk"
    )
    parser.add_argument("--setup", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--walk", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.setup:
        return setup(args.setup)
    if args.walk:
        return walk(Path(args.walk))
    runs = 5 if args.quick else 7  # more rounds than bench/api.py: a 3 s round on a shared machine swings by 2x
    seconds = 3.0 if args.quick else 8.0
    # Enough files for the reads (2 sides x runs x seconds, plus start-up) at the budget, twice over.
    files = int(args.budget / 60 * (2 * runs * seconds + 15) * 2)

    tmp = scratch_dir("airlock-bench-rescan-")
    # YARA only: clamd would be a second scanner, shared with every other bench and test on the machine.
    db, env = scratch_database(
        tmp,
        CLAMD_SOCKET=None,
        AIRLOCK_RATE_LIMITS={"rescan_files_per_minute": 0},
        AIRLOCK_SERVE={"tick_seconds": TICK_SECONDS},
    )
    gunicorn = walker = None
    try:
        facts = prepare(env)
        made = child(["--setup", str(files)], env, 1200)
        gunicorn = Gunicorn(env, tmp)
        pair = status_pair(facts)
        for spec in pair:  # warm-up: connections, imports, caches in both workers
            drive(gunicorn.base, tmp, seconds=1, **spec)
        idle = alternate(gunicorn.base, tmp, pair, runs=runs, seconds=seconds)

        stop_file = tmp / "stop-walk"
        walk_env = with_group_keys(dict(env), "AIRLOCK_RATE_LIMITS", rescan_files_per_minute=args.budget)
        walker = subprocess.Popen(
            [sys.executable, __file__, "--walk", str(stop_file)],
            cwd=REPO,
            env=walk_env,
            stdout=subprocess.PIPE,
            stderr=open(tmp / "walk.log", "wb"),
            text=True,
        )
        if not any(line.strip() == "walking" for line in walker.stdout):  # type: ignore[union-attr]
            raise RuntimeError(f"the walk did not start: {(tmp / 'walk.log').read_text()[-2000:]}")
        time.sleep(3 * float(TICK_SECONDS))  # the first tick notices the new version, the next ones queue
        during = alternate(gunicorn.base, tmp, pair, runs=runs, seconds=seconds)
        stop_file.touch()
        out, _ = walker.communicate(timeout=300)
        if walker.returncode != 0:
            raise RuntimeError(f"the walk failed: {(tmp / 'walk.log').read_text()[-2000:]}")
        walked = json.loads(out.strip().splitlines()[-1])
    finally:
        if walker is not None and walker.poll() is None:
            walker.kill()
        if gunicorn is not None:
            gunicorn.stop()
        db.drop()

    achieved = walked["rescanned"] / walked["walk_seconds"] * 60
    emit(
        {
            "rescan_files_per_s": r(made["timed_files"] / made["timed_seconds"], 1),
            "rescan_budget_files_per_min": args.budget,
            "rescan_budget_files_per_min_achieved": r(achieved, 1),
            "rescan_budget_achieved_ratio": r(achieved / args.budget),
            "api_status_vs_bare_select_ratio_during_rescan": r(median(during)),
            "api_status_vs_bare_select_ratio_idle": r(median(idle)),
            "rescan": {
                "ratio_runs_during": [r(x) for x in during],
                "ratio_runs_idle": [r(x) for x in idle],
                "walk_running_throughout": not walked["walk_finished_before_stop"],
                **walked,
                "files": made["files"],
                "database": made["database"],
                "signatures": made["signatures"],
            },
            "rescan_setup": (
                f"{made['files']} ready {made['photo_bytes'] // 1024} KiB JPEGs, YARA only; "
                f"rescan_one timed on {made['timed_files']} back to back; the walk: JobRuntime "
                f"(ticks every {TICK_SECONDS}s, in-process broker) at "
                f"AIRLOCK_RATE_LIMITS=rescan_files_per_minute={args.budget}; status reads as in bench/api.py, "
                f"{seconds:g}s x {runs} runs per side, idle then during the walk"
            ),
        }
    )


if __name__ == "__main__":
    main()
