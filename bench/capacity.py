#!/usr/bin/env python
"""Per file kind: CPU-ms and database statements of each phase, for the capacity model (docs/capacity.md).

    python bench/capacity.py [--quick] [--kinds photo,heic,pdf,zip,video] [--profile photo]

On the embedded default (SQLite, in-process broker) or, with DATABASE_URL and
REDIS_URL set, on PostgreSQL + Redis (bench/run.py's redis_env makes scratch ones).
Each file goes through the pipeline one at a time, every phase called inline in
this thread as its actor would (intent and PUT as the views call them, then
intake and each step): so every statement is this thread's and is counted with
connection.execute_wrapper, and CPU is this process's plus its descendants'
(the sandbox's fork server and its jobs: /proc utime + stime, children
included), per phase. No queue wait and no concurrency: this is the work per
file, not latency under load. Every file must end ready.

--s3 puts storage on a moto S3 server (a subprocess on loopback) and counts
what crosses the S3 API per file and phase: the client's own presigned PUT,
and every request the service makes through the gateway's boto3 client
(botocore's public before-send / after-call events): requests by operation,
bytes sent and received. moto runs as this process's child, so its CPU would
be counted as ours: with --s3 the CPU figures are left out.

--profile KIND also runs cProfile over that kind's phases (--profile-files more
files, summed per phase) and reports, per phase, the functions with the most own
and cumulative time.
Prints one JSON line. The machine is shared: CPU-ms include cache and scheduler
effects of whatever else runs.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import resource
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    bench_django,
    emit,
    make_user,
    median,
    photo_jpeg,
    r,
    sample_intent,
    scratch_dir,
    signed_put,
    text_pdf,
)

_TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu_s(root: int | None = None) -> float:
    """CPU seconds of a process (default: this one) and every live descendant, each with its reaped children's.

    This process's own share to the microsecond (getrusage); others' in clock ticks (/proc has nothing finer).
    """
    me = os.getpid()
    root = root or me
    stats: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2 :].split()
        # after the command: state ppid … utime(11) stime(12) cutime(13) cstime(14), 0-based from state
        stats[int(entry)] = (int(fields[1]), sum(int(fields[i]) for i in (11, 12, 13, 14)) / _TICK)
    total = 0.0
    if root == me:
        own, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        total = own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime
    seen, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        if pid != me:
            total += stats.get(pid, (0, 0.0))[1]
        children = [p for p, (ppid, _) in stats.items() if ppid == pid and p not in seen]
        seen.update(children)
        frontier += children
    return total


def start_moto() -> subprocess.Popen:
    """moto's S3 on a loopback port, storage pointed at a fresh bucket on it (before Django reads settings)."""
    import socket

    import boto3

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    os.environ.update(
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench-secret",
        AWS_DEFAULT_REGION="us-east-1",
        AIRLOCK_STORAGE="s3",
        AIRLOCK_S3_ENDPOINT_URL=endpoint,
        AIRLOCK_S3_REGION="us-east-1",
        AIRLOCK_S3_BUCKET="airlock-capacity",
    )
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        os.environ.pop(name, None)
    deadline = time.monotonic() + 60
    while True:
        try:
            boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="airlock-capacity")
            return server
        except Exception:  # noqa: BLE001 - not up yet
            if time.monotonic() > deadline:
                server.kill()
                raise
            time.sleep(0.3)


class S3Traffic:
    """Requests and bytes through a boto3 client, by operation (botocore's public event hooks)."""

    def __init__(self, client) -> None:
        self.requests: dict[str, int] = {}
        self.log: list[str] = []  # operation and key, in order
        self.sent = self.received = 0
        client.meta.events.register("before-send.s3", self._before_send)
        client.meta.events.register("after-call.s3", self._after_call)

    def _before_send(self, request, **_kwargs) -> None:
        self.sent += int(request.headers.get("Content-Length") or 0)
        from urllib.parse import urlsplit

        self._path = urlsplit(request.url).path

    def _after_call(self, http_response, model, **_kwargs) -> None:
        self.requests[model.name] = self.requests.get(model.name, 0) + 1
        self.log.append(f"{model.name} {getattr(self, '_path', '')}")
        if model.name != "HeadObject":  # a HEAD's Content-Length is the object's size, not bytes received
            self.received += int(http_response.headers.get("content-length") or 0)

    def total(self) -> tuple[int, int, int]:
        return sum(self.requests.values()), self.sent, self.received


def make_files(directory: Path, video_seconds: int) -> dict[str, dict]:
    """One file per kind: what a user sends."""
    directory.mkdir(parents=True, exist_ok=True)
    files: dict[str, dict] = {}

    def add(kind: str, name: str, data: bytes | None, profile: str, content_type: str) -> None:
        path = directory / name
        if data is not None:
            path.write_bytes(data)
        files[kind] = {"path": path, "profile": profile, "content_type": content_type, "kind": kind}

    add("photo", "photo.jpg", photo_jpeg(7), "image", "image/jpeg")  # 4000 x 3000: 12 MP
    from bench.heic_bench import heic_photo

    add("heic", "photo.heic", heic_photo(8, (4000, 3000)), "image", "image/heic")
    add("pdf", "report.pdf", text_pdf(20, seed=9), "document", "application/pdf")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for i in range(20):
            archive.writestr(f"notes/{i}.txt", ("line %d of a plain text file\n" % i) * 400)
        archive.writestr("photo.jpg", photo_jpeg(10, (1600, 1200)))
    add("zip", "bundle.zip", buf.getvalue(), "archive", "application/zip")
    from bench.media_bench import phone_clip

    seconds = video_seconds
    phone_clip(directory / "clip.mp4", 11, seconds)
    add("video", "clip.mp4", None, "media", "video/mp4")
    files["video"]["seconds"] = seconds
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 files per kind, a 10-second clip")
    parser.add_argument("--kinds", default="photo,heic,pdf,zip,video")
    parser.add_argument("--video-seconds", type=int, default=0, help="length of the clip (default 60; 10 with --quick)")
    parser.add_argument("--s3", action="store_true", help="storage on moto's S3: requests and bytes per file")
    parser.add_argument("--profile", default="", help="cProfile more files of this kind, one profile per phase")
    parser.add_argument("--profile-files", type=int, default=5, help="files of that kind profiled (summed)")
    args = parser.parse_args()
    moto = start_moto() if args.s3 else None
    if moto is not None:
        import atexit

        atexit.register(moto.kill)  # also when the run fails half-way
    bench_django()

    from django.db import connection

    from attachments.models import Attachment
    from attachments.services import outbox
    from attachments.uploads.services.uploads import upload_complete
    from processing import pipeline
    from processing.sandbox import shutdown

    traffic = None
    if args.s3:
        from attachments.storage import get_gateway

        traffic = S3Traffic(get_gateway().client)  # type: ignore[attr-defined]
    tmp = scratch_dir("airlock-bench-capacity-")
    files = make_files(tmp / "files", args.video_seconds or (10 if args.quick else 60))
    user = make_user()
    reps = 3 if args.quick else 8
    statements: list[str] = []
    commits = [0]
    wrote = [False]  # a write in the open transaction: its COMMIT is one the database makes durable

    def counting(execute, sql, params, many, context):
        statements.append(sql)
        if not sql.lstrip().upper().startswith("SELECT"):
            if connection.in_atomic_block:
                wrote[0] = True
            else:
                commits[0] += 1  # autocommit: the statement is its own transaction
        return execute(sql, params, many, context)

    real_commit = connection.commit

    def counting_commit() -> None:
        # Atomic's outermost exit commits here; a transaction that only read is not counted.
        if wrote[0]:
            commits[0] += 1
        wrote[0] = False
        real_commit()

    real_rollback = connection.rollback

    def counting_rollback() -> None:
        wrote[0] = False
        real_rollback()

    connection.commit = counting_commit  # type: ignore[method-assign]
    connection.rollback = counting_rollback  # type: ignore[method-assign]
    # The bulk "sent" marks (attachments/services/outbox.py) are held until this thread flushes them after
    # each kind's files: one UPDATE per flush, however many files' jobs it marks. A process under load flushes
    # once per SENT_MARK_DELAY_S for all the files it served meanwhile, so per file that is ~0 and is reported
    # apart (sent_mark_flushes), not in the per-file phases.
    outbox.SENT_MARK_DELAY_S = 3600
    listed: dict[str, list[str]] = {}
    s3_listed: dict[str, list[str]] = {}

    def one_file(item: dict, observe: Callable[[str, Callable[[], object]], None]) -> None:
        data = item["path"].read_bytes()
        holder: dict = {}

        def intent() -> None:
            made = sample_intent(user, item, data)
            holder["pk"], holder["upload"] = made.attachment.pk, made.upload

        observe("intent", intent)
        pk = holder["pk"]
        if args.s3:
            import requests

            upload = holder["upload"]
            assert not upload.parts, "a multipart upload: keep files under AIRLOCK_S3_MULTIPART_THRESHOLD"
            # The client's PUT, straight to S3 (not ours: counted apart, as the client's traffic).
            if upload.method == "POST":  # a presigned POST form: its fields, then the file
                response = requests.post(upload.url, data=upload.fields, files={"file": data}, timeout=120)
            else:
                response = requests.put(upload.url, data=data, headers=upload.headers, timeout=120)
            response.raise_for_status()
            observe("complete", lambda: upload_complete(attachment=Attachment.objects.get(pk=pk)))
        else:
            observe("put", lambda: signed_put(pk, data))
        observe("intake", lambda: pipeline.start_and_intake(pk))
        for _ in range(6):
            row = Attachment.objects.only("status", "lease_token", "step").get(pk=pk)
            if row.status != "processing":
                break
            observe(row.step, lambda: pipeline.run_stage(pk, row.lease_token, row.step))
        status, reason = Attachment.objects.filter(pk=pk).values_list("status", "reason_code").get()
        assert status == "ready", (item["kind"], status, reason)

    def flush_broker() -> None:
        import dramatiq

        dramatiq.get_broker().flush_all()  # no worker consumes the doorbells: every step ran inline

    results: dict[str, dict] = {}
    listed_kinds: set[str] = set()
    for kind in args.kinds.split(","):
        item = files[kind]
        one_file(item, lambda name, fn: fn())  # warm-up: imports, the sandbox's fork server, scanner rules
        per_phase: dict[str, dict[str, list[float]]] = {}

        def measure(name: str, fn: Callable[[], object]) -> None:
            before_n, cpu, wall = len(statements), tree_cpu_s(), time.perf_counter()
            commits_before = commits[0]
            s3_before = traffic.total() if traffic else (0, 0, 0)
            s3_log_before = len(traffic.log) if traffic else 0
            fn()
            got = per_phase.setdefault(name, {"cpu_ms": [], "wall_ms": [], "statements": [], "commits": []})
            if not args.s3:
                got["cpu_ms"].append((tree_cpu_s() - cpu) * 1000)
            got["wall_ms"].append((time.perf_counter() - wall) * 1000)
            got["statements"].append(len(statements) - before_n)
            got["commits"].append(commits[0] - commits_before)
            if kind not in listed_kinds or os.environ.get("CAP_LIST_ALL"):
                listed.setdefault(f"{kind}.{name}", []).extend(
                    [" ".join(sql.split())[:160] for sql in statements[before_n:]]
                )
                if traffic:
                    s3_listed.setdefault(f"{kind}.{name}", []).extend(traffic.log[s3_log_before:])
            if traffic:
                for label, after, before in zip(
                    ("s3_requests", "s3_bytes_sent", "s3_bytes_received"), traffic.total(), s3_before
                ):
                    got.setdefault(label, []).append(after - before)

        outbox.flush_sent_marks()  # the warm-up's
        requests_before = dict(traffic.requests) if traffic else {}
        with connection.execute_wrapper(counting):
            for _ in range(reps):
                one_file(item, measure)
                listed_kinds.add(kind)  # each statement and request of the first measured file, listed
            flush_before, commits_before = len(statements), commits[0]
            marked = outbox.flush_sent_marks()
            flush = {
                "files": reps,
                "jobs_marked": marked,
                "statements": len(statements) - flush_before,
                "commits": commits[0] - commits_before,
            }
        flush_broker()
        phases = {name: {k: r(median(v), 1) for k, v in got.items() if v} for name, got in per_phase.items()}
        worker = [p for p in phases if p not in ("intent", "put", "complete")]
        upload_side = [p for p in phases if p in ("intent", "put", "complete")]
        if args.s3:
            results[kind] = {
                "bytes": item["path"].stat().st_size,
                **({"video_seconds": item["seconds"]} if "seconds" in item else {}),
                "phases": phases,
                "client_put_to_s3": {"requests": 1, "bytes": item["path"].stat().st_size},
                "service_s3_requests_per_file": sum(phases[p].get("s3_requests", 0) for p in phases),
                "service_s3_bytes_sent_per_file": sum(phases[p].get("s3_bytes_sent", 0) for p in phases),
                "service_s3_bytes_received_per_file": sum(phases[p].get("s3_bytes_received", 0) for p in phases),
                "service_s3_operations_per_file": {
                    op: r((n - requests_before.get(op, 0)) / reps, 2)
                    for op, n in traffic.requests.items()
                    if n - requests_before.get(op, 0)
                }
                if traffic
                else {},
                "worker_statements": sum(int(phases[p]["statements"]) for p in worker),
                "upload_statements": sum(int(phases[p]["statements"]) for p in upload_side),
                "commits": sum(int(phases[p]["commits"]) for p in phases),
                "sent_mark_flushes": flush,
            }
            continue
        results[kind] = {
            "bytes": item["path"].stat().st_size,
            **({"video_seconds": item["seconds"]} if "seconds" in item else {}),
            "phases": phases,
            "worker_cpu_ms": r(sum(phases[p]["cpu_ms"] for p in worker), 1),
            "worker_statements": sum(int(phases[p]["statements"]) for p in worker),
            "upload_cpu_ms": r(sum(phases[p]["cpu_ms"] for p in ("intent", "put")), 1),
            "upload_statements": sum(int(phases[p]["statements"]) for p in ("intent", "put")),
            "commits": sum(int(phases[p]["commits"]) for p in phases),
            "sent_mark_flushes": flush,
        }

    profiles: dict[str, dict[str, list[str]]] = {}
    if args.profile:
        # One profiler per phase, over several files: one file's profile on a loaded machine is mostly
        # whoever else had the core (a 60 ms quote_name() in one sample).
        profilers: dict[str, cProfile.Profile] = {}

        def profiled(name: str, fn: Callable[[], object]) -> None:
            profilers.setdefault(name, cProfile.Profile()).runcall(fn)

        for _ in range(args.profile_files):
            one_file(files[args.profile], profiled)
        flush_broker()
        for name, profiler in profilers.items():
            profiles[name] = {}
            for order in ("tottime", "cumulative"):
                out = io.StringIO()
                stats = pstats.Stats(profiler, stream=out)
                stats.strip_dirs().sort_stats(order).print_stats(15)
                lines = [line.rstrip() for line in out.getvalue().splitlines() if line.strip()]
                start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls"))
                profiles[name][order] = lines[start:]
    shutdown()
    if moto is not None:
        moto.terminate()
        moto.wait(timeout=30)
    figures: dict[str, object] = {}
    photo = results.get("photo")
    if photo and not args.s3:
        figures["db_statements_per_photo"] = photo["worker_statements"] + photo["upload_statements"]
        figures["db_commits_per_photo"] = photo["commits"]
    if photo and args.s3:
        figures["s3_requests_per_photo"] = photo["service_s3_requests_per_file"]
        figures["s3_operations_per_photo"] = photo["service_s3_operations_per_file"]
        figures["db_statements_per_photo_s3"] = photo["worker_statements"] + photo["upload_statements"]
        figures["db_commits_per_photo_s3"] = photo["commits"]
    emit(
        {
            **figures,
            "capacity_by_kind": results,
            "capacity_statements_listed": listed,
            "capacity_s3_requests_listed": s3_listed,
            "capacity_profile_kind": args.profile or None,
            "capacity_profile": profiles,
            "capacity_database": connection.vendor,
            "capacity_storage": "s3 (moto_server)" if args.s3 else "local",
            "capacity_broker": type(__import__("dramatiq").get_broker()).__name__,
            "capacity_reps": reps,
            "capacity_cores": os.cpu_count(),
            "capacity_mode": (
                "every phase inline in one thread, one file at a time (no queue, no concurrency); "
                "CPU = this process + the sandbox's processes; statements = this connection's"
            ),
        }
    )


if __name__ == "__main__":
    main()
