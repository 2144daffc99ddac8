#!/usr/bin/env python
"""Run every benchmark, write bench/results.json and print a short table.

    .venv/bin/python bench/run.py [--quick] [--only pipeline,thumbnails,...]
    .venv/bin/python bench/run.py --scaling [--quick] [--max-processes N]

Each benchmark runs in its own process with its own scratch directory (see
the docstring at the top of each module). The machine is shared and noisy:
every figure is a median of several runs, and each speed figure is a ratio
against a baseline measured in the same run, interleaved with it.

  pipeline     bench/pipeline_overhead.py   pipeline time per file ÷ bare step time per file (+ serial, also
                                            ÷ the bare steps decoding in confined sandbox jobs),
                                            embedded (serve's worker) and again with rundramatiq -p 2 on
                                            PostgreSQL + Redis (keys ending _redis)
  thumbnails   bench/thumbnails.py          our image step vs plain Pillow and pyvips
  heic         bench/heic_bench.py          sandboxed HEIC photo vs the same pillow-heif calls in-process
  media        bench/media_bench.py         sandboxed video probe + poster vs the same PyAV calls in-process
  video1g      bench/video1g_bench.py       ~1 GiB MP4 complete → ready (serve) vs bare scan, probe, poster, remux
  video1g_s3   bench/video1g_bench.py --s3  the same with serve's storage on moto's S3 (multipart plan + complete)
  ttr          bench/time_to_ready.py       upload complete → ready over HTTP, idle and 2x overload
  api          bench/api.py                 gunicorn + wrk, ours vs bare DRF views; queries per request
  sweeper      bench/sweeper_throughput.py  sweep vs plain DELETE of the same rows and objects on PostgreSQL, EXPLAIN
  memory       bench/memory.py              peak RSS of the worker and the sandbox over the hostile corpus
  serve        bench/serve_bench.py         serve vs gunicorn -w 2 (status; PostgreSQL, SQLite), a soak, waiters' CPU
  webhooks     bench/webhooks_bench.py      signed webhook deliveries/s from the outbox to a loopback receiver
  tus          bench/tus_bench.py           tus upload (tuspy, 5 MiB PATCHes) vs one PUT of the same file, via serve
  quotas       bench/quotas_bench.py        intents/s with a tenant quota vs without (same server); SUM vs counter
  client_tokens bench/client_token_bench.py intents/s with a client token vs the service token + Airlock-Subject
  slow         bench/slow_clients.py        /healthz, authenticated GET p99 while 500 slow clients trickle (serve)
  burst        bench/burst_s3.py            200 S3 uploads at once while CPU hogs load both cores: share answered, p99
  fair         bench/fair_bench.py          tenant B's time to ready while A has 1,000 files queued (embedded, Redis)
  rescan       bench/rescan_bench.py        rescan_one files/s, the walk's rate vs its budget, status reads during it
  variants     bench/variant_bench.py       12 MP photo: cold medium variant, warm vs download, single flight (serve)
  variant_flood bench/variant_flood_bench.py another tenant's cold variant while one floods 36 cold variants (serve)
  r2           bench/r2_bench.py            R2 notifications/s over the Cloudflare Queues pull API vs S3 events over SQS
                                            (consume_storage_events, PostgreSQL, moto, the Queues stand-in)
  outages      bench/outage_bench.py        time to ready after Redis lost, connections cut, clamd down, a worker killed
  readyz       bench/readyz_bench.py        /readyz p99 and 503s, 30 clients x 20, PostgreSQL + Redis + S3 (moto)
  album        bench/album_bench.py         a ref's ZIP (~1 GB of photos; 200 MB --quick) vs reading the files; RSS
  transcode    bench/transcode_bench.py     web rendition of 60 s 1080p HEVC (10 s 720p --quick) vs bare PyAV;
                                            photos' time to ready while two transcodes run
  redis        bench/redis_bench.py         Redis commands per photo on a private redis-server (MONITOR), by
                                            command and sender; an idle worker's commands/s (PostgreSQL)
  guest        bench/guest_bench.py         200 guests x 5 photos through one upload link as its page sends them
                                            (PostgreSQL + Redis, serve): share ready, 5xx, unretried 429s; the
                                            link page's first paint in Chromium at 390 x 844
  capacity     bench/capacity.py            a 12 MP photo's statements and commits (PostgreSQL + Redis) and
                                            S3 requests of ours (moto): counts per file, not timings

bench/capacity.py alone gives CPU-ms, statements and (with --s3) S3 requests and
bytes for every file kind, the inputs of docs/capacity.md.

--scaling runs only the scaling curve: the pipeline on PostgreSQL + Redis with
1, 2, … N rundramatiq processes (N = cores), files/s and efficiency per k
(scaling_* keys), so the curve can be taken on a bigger machine with one command.

results.json is one flat object: nested figures are flattened to dotted keys.
A benchmark that fails leaves its keys null and its error under "errors.<name>".
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import report  # noqa: E402
from bench.common import REPO, embedded_env, machine  # noqa: E402

RESULTS = REPO / "bench" / "results.json"
PG = "postgres://postgres@127.0.0.1:5432"
REDIS = "redis://127.0.0.1:6379/0"

# key, goal text, predicate on the value
GOALS: list[tuple[str, str, object]] = [
    ("pipeline_overhead_ratio", "<= 1.2", lambda v: v <= 1.2),
    # Counts, not timings (bench/capacity.py: a 12 MP photo, PostgreSQL + Redis; S3 on moto).
    ("db_statements_per_photo", "<= 14 (upload + worker)", lambda v: v <= 14),
    ("db_commits_per_photo", "<= 4", lambda v: v <= 4),
    ("s3_requests_per_photo", "<= 6 (ours; the client's upload not counted)", lambda v: v <= 6),
    # One file at a time ÷ the same bare steps with each decode in a freshly forked confined sandbox job.
    (
        "pipeline_serial_overhead_vs_confined_ratio",
        "<= 1.3 (bare steps decoding in a confined job)",
        lambda v: v <= 1.3,
    ),
    ("pipeline_serial_overhead_vs_confined_ratio_redis", "(info: rundramatiq -p 2, PostgreSQL + Redis)", None),
    ("pipeline_serial_overhead_ratio", "(info: bare steps decoding in process)", None),
    ("pipeline_vs_bare_parallel_ratio", "(info)", None),
    ("pipeline_serial_overhead_ratio_redis", "(info: rundramatiq -p 2, PostgreSQL + Redis)", None),
    ("pipeline_vs_bare_parallel_ratio_redis", "(info: rundramatiq -p 2, PostgreSQL + Redis)", None),
    ("pipeline_overhead_ratio_redis", "(info)", None),
    ("thumbnail_vs_pillow_plain_ratio", ">= 1.0", lambda v: v >= 1.0),
    # pyvips decodes a PNG faster than Pillow with the same zlib-ng; the sandbox's forks cost a little more.
    ("thumbnail_vs_pyvips_ratio", ">= 0.85", lambda v: v >= 0.85),
    ("thumbnail_inprocess_vs_pillow_plain_ratio", "(info)", None),
    ("thumbnail_inprocess_vs_pyvips_ratio", "(info)", None),
    ("heic_thumbnail_vs_bare_ratio", "<= 1.3", lambda v: v <= 1.3),
    ("heic_inprocess_vs_bare_ratio", "(info)", None),
    ("media_probe_poster_vs_bare_pyav_ratio", "<= 1.3", lambda v: v <= 1.3),
    ("media_inprocess_vs_bare_pyav_ratio", "(info)", None),
    ("video_1gib_pipeline_vs_bare_steps_ratio", "<= 1.3", lambda v: v <= 1.3),
    ("video_1gib_worker_rss_growth_mb", "< 64", lambda v: v < 64),
    ("video_1gib.file_mib", "(info: size used; 256 with --quick)", None),
    ("video_1gib_pipeline_vs_bare_steps_ratio_s3", "<= 1.3", lambda v: v <= 1.3),
    ("video_1gib_worker_rss_growth_mb_s3", "< 64", lambda v: v < 64),
    ("video_1gib_s3.file_mib", "(info: size used; 256 with --quick)", None),
    ("time_to_ready_p50_s", "(info)", None),
    ("time_to_ready_p99_s", "<= 0.5", lambda v: v <= 0.5),
    ("time_to_ready_overload.p99_s", "<= 2 (accepted files, shedding on)", lambda v: v <= 2.0),
    ("time_to_ready_overload.shed", "(info: intents shed)", None),
    ("time_to_ready_overload.queue_age_max_s", "(info)", None),
    ("api_intent_vs_bare_insert_ratio", ">= 0.7", lambda v: v >= 0.7),
    ("api_status_vs_bare_select_ratio", ">= 0.8", lambda v: v >= 0.8),
    ("api_download_vs_bare_file_ratio", "(info)", None),
    ("api_list_queries_constant", "true", lambda v: v is True),
    # serve is plain gthread underneath: about gunicorn's rate, minus its own accounting per request.
    ("serve_vs_gunicorn_status_ratio", ">= 0.9", lambda v: v >= 0.9),
    ("serve_vs_gunicorn_embedded_ratio", ">= 0.9 (SQLite, web only)", lambda v: v >= 0.9),
    ("soak.responses_5xx", "== 0", lambda v: v == 0),
    ("soak.pg_connections_within_bound", "true", lambda v: v is True),
    ("soak.rss_growth_pct", "<= 10", lambda v: v <= 10),
    ("waiters_cpu_s_per_100x30s", "<= 1", lambda v: v <= 1),
    ("burst_s3_200_clients_ok_ratio", "== 1.0 (slower, never refused)", lambda v: v == 1.0),
    ("burst_s3_200_clients_p99_s", "(info)", None),
    ("quota_intent_on_vs_off_ratio", ">= 0.9", lambda v: v >= 0.9),
    ("client_token_vs_service_token_intent_ratio", ">= 0.9", lambda v: v >= 0.9),
    ("quota_usage_sum_alternative.sum_ms", "(info: the SUM a counter avoids)", None),
    ("quota_usage_sum_alternative.counter_update_ms", "(info)", None),
    ("sweeper_vs_bare_delete_ratio", ">= 0.5 (same rows and storage deletes; PostgreSQL)", lambda v: v >= 0.5),
    ("sweeper_vs_bare_delete_ratio_with_webhooks", "(info: one endpoint, an event per delete)", None),
    ("sweeper_rows_per_s", "(info: absolute, load-dependent)", None),
    ("sweeper_index_used", "true", lambda v: v is True),
    ("webhook_delivery_events_per_s", ">= 200", lambda v: v >= 200),
    ("webhook_emit_events_per_s", "(info)", None),
    ("tus_vs_put_throughput_ratio", ">= 0.8", lambda v: v >= 0.8),
    ("tus_upload_mib_per_s", "(info)", None),
    ("slow_clients_healthz_p99_s", "<= 0.5 (500 slow sockets open)", lambda v: v <= 0.5),
    ("slow_clients_auth_get_p99_s", "(info)", None),
    ("slow_clients_failures", "== 0", lambda v: v == 0),
    ("ttr_p99_other_tenant_under_burst_s", "<= 1 (embedded)", lambda v: v <= 1.0),
    ("ttr_p99_other_tenant_under_burst_derive_only_s", "(info: cap on derive only, as before)", None),
    ("ttr_p99_other_tenant_under_burst_redis_s", "<= 1 (PostgreSQL + Redis, rundramatiq)", lambda v: v <= 1.0),
    ("ttr_p99_other_tenant_under_burst_redis_derive_only_s", "(info)", None),
    ("ttr_idle_p50_s", "(info: one file after a quiet second, embedded)", None),
    ("ttr_idle_p50_redis_s", "<= 0.5 (one file after a quiet second, rundramatiq)", lambda v: v <= 0.5),
    ("rescan_files_per_s", "(info: rescan_one back to back, YARA only)", None),
    ("rescan_budget_files_per_min_achieved", "(info: vs rescan_budget_files_per_min)", None),
    ("rescan_budget_achieved_ratio", ">= 0.9 (the walk keeps to its budget)", lambda v: v >= 0.9),
    ("api_status_vs_bare_select_ratio_during_rescan", ">= 0.8", lambda v: v >= 0.8),
    ("api_status_vs_bare_select_ratio_idle", "(info: same run, no rescan)", None),
    ("variant_cold_p99_s", "<= 0.5 (12 MP photo, medium, embedded)", lambda v: v <= 0.5),
    ("variant_cold_p50_s", "(info)", None),
    ("variant_warm_vs_download_ratio", ">= 0.9", lambda v: v >= 0.9),
    ("variant_single_flight_generations", "== 1 (50 concurrent cold requests)", lambda v: v == 1),
    ("variant_flood_other_tenant_p99_s", "<= 1.0 (one tenant floods 36 cold variants, embedded)", lambda v: v <= 1.0),
    ("r2_consumer_events_per_s", "(info: pull → applied → acked, PostgreSQL)", None),
    ("sqs_consumer_events_per_s", "(info: receive → applied → deleted, same run)", None),
    ("r2_vs_sqs_consumer_ratio", ">= 0.9", lambda v: v >= 0.9),
    ("readyz_p99_s", "<= 0.2 (30 clients, PostgreSQL + Redis + S3)", lambda v: v <= 0.2),
    ("readyz_503", "== 0 (a healthy instance)", lambda v: v == 0),
    ("album_zip_vs_disk_read_ratio", ">= 0.7 (~1 GB of photos; 200 MB with --quick)", lambda v: v >= 0.7),
    ("album_zip_worker_rss_growth_mb", "< 64 (serve's web process during the archive)", lambda v: v < 64),
    ("transcode_vs_bare_pyav_ratio", "<= 1.15 (60 s 1080p HEVC; 10 s 720p with --quick)", lambda v: v <= 1.15),
    ("ttr_p99_during_transcodes_s", "<= 1 (12 MP photos while two transcodes run)", lambda v: v <= 1.0),
    ("outage_recovery_p99_s", "<= 60 (worst of four outages, serve on PostgreSQL + Redis + clamd)", lambda v: v <= 60),
    ("outage_recovery.redis_s", "(info: Redis restarted empty)", None),
    ("outage_recovery.database_s", "(info: pg_terminate_backend)", None),
    ("outage_recovery.clamd_s", "(info: clamd down 60 s; 15 s with --quick)", None),
    ("outage_recovery.worker_s", "(info: serve's job process SIGKILLed)", None),
    ("guest_burst_ok_ratio", "== 1.0 (200 guests x 5 photos, one link, PostgreSQL + Redis)", lambda v: v == 1.0),
    ("guest_burst.responses_5xx", "== 0", lambda v: v == 0),
    ("guest_burst.unretried_429", "== 0 (every 429 waited out by its Retry-After)", lambda v: v == 0),
    ("guest_page_load_s", "< 1 (first paint of the link page, Chromium at 390 x 844)", lambda v: v < 1.0),
    ("worker_peak_rss_mb", "< 1024", lambda v: v < 1024),
    ("sandbox_peak_rss_mb", "< 1024", lambda v: v < 1024),
    ("redis_commands_per_photo", "<= 30 (private Redis, idle polling excluded)", lambda v: v <= 30),
    ("redis_commands_executed_per_photo", "(info: with the commands scripts run, as INFO counts)", None),
    ("redis_commands_per_photo_incl_polling", "(info: everything while the photos went through)", None),
    ("redis_idle_commands_per_s", "(info: one idle worker process)", None),
]
REQUIRED = [
    "pipeline_overhead_ratio",
    "thumbnail_vs_pillow_plain_ratio",
    "thumbnail_vs_pyvips_ratio",
    "time_to_ready_p50_s",
    "time_to_ready_p99_s",
    "api_intent_vs_bare_insert_ratio",
    "api_status_vs_bare_select_ratio",
    "sweeper_vs_bare_delete_ratio",
    "worker_peak_rss_mb",
    "sandbox_peak_rss_mb",
]
OWN_KEYS = {
    "pipeline": ["pipeline_overhead_ratio", "pipeline_serial_overhead_vs_confined_ratio"],
    "capacity": ["db_statements_per_photo", "db_commits_per_photo", "s3_requests_per_photo"],
    "thumbnails": ["thumbnail_vs_pillow_plain_ratio", "thumbnail_vs_pyvips_ratio"],
    "heic": ["heic_thumbnail_vs_bare_ratio"],
    "media": ["media_probe_poster_vs_bare_pyav_ratio"],
    "video1g": ["video_1gib_pipeline_vs_bare_steps_ratio", "video_1gib_worker_rss_growth_mb"],
    "video1g_s3": ["video_1gib_pipeline_vs_bare_steps_ratio_s3", "video_1gib_worker_rss_growth_mb_s3"],
    "ttr": ["time_to_ready_p50_s", "time_to_ready_p99_s"],
    "api": ["api_intent_vs_bare_insert_ratio", "api_status_vs_bare_select_ratio"],
    "sweeper": ["sweeper_vs_bare_delete_ratio", "sweeper_rows_per_s"],
    "memory": ["worker_peak_rss_mb", "sandbox_peak_rss_mb"],
    "serve": [
        "serve_vs_gunicorn_status_ratio",
        "serve_vs_gunicorn_embedded_ratio",
        "soak.responses_5xx",
        "soak.pg_connections_within_bound",
        "soak.rss_growth_pct",
        "waiters_cpu_s_per_100x30s",
    ],
    "webhooks": ["webhook_delivery_events_per_s"],
    "tus": ["tus_vs_put_throughput_ratio"],
    "quotas": ["quota_intent_on_vs_off_ratio"],
    "client_tokens": ["client_token_vs_service_token_intent_ratio"],
    "slow": ["slow_clients_healthz_p99_s", "slow_clients_auth_get_p99_s", "slow_clients_failures"],
    "burst": ["burst_s3_200_clients_ok_ratio", "burst_s3_200_clients_p99_s"],
    "fair": ["ttr_p99_other_tenant_under_burst_s", "ttr_p99_other_tenant_under_burst_redis_s", "ttr_idle_p50_redis_s"],
    "rescan": [
        "rescan_files_per_s",
        "rescan_budget_files_per_min_achieved",
        "rescan_budget_achieved_ratio",
        "api_status_vs_bare_select_ratio_during_rescan",
    ],
    "variants": ["variant_cold_p99_s", "variant_warm_vs_download_ratio", "variant_single_flight_generations"],
    "variant_flood": ["variant_flood_other_tenant_p99_s"],
    "readyz": ["readyz_p99_s", "readyz_503"],
    "r2": ["r2_consumer_events_per_s", "r2_vs_sqs_consumer_ratio"],
    "album": ["album_zip_vs_disk_read_ratio", "album_zip_worker_rss_growth_mb"],
    "transcode": ["transcode_vs_bare_pyav_ratio", "ttr_p99_during_transcodes_s"],
    "outages": ["outage_recovery_p99_s"],
    "redis": ["redis_commands_per_photo", "redis_commands_executed_per_photo", "redis_idle_commands_per_s"],
    "guest": ["guest_burst_ok_ratio", "guest_page_load_s"],
}


def stale_keys(previous: dict[str, object], fresh: dict[str, object]) -> list[str]:
    """Keys an earlier run wrote under a group this run wrote again but did not write this time
    (a status code seen then and not now: `guest_burst.statuses.503`)."""
    groups = {key.split(".", 1)[0] + "." for key in fresh if "." in key} - {"seconds.", "errors.", "machine."}
    return [key for key in previous if key not in fresh and any(key.startswith(group) for group in groups)]


def flatten(value: object, prefix: str = "") -> dict[str, object]:
    if isinstance(value, dict):
        out: dict[str, object] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        return {prefix: [json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v for v in value]}
    return {prefix: value}


def run_child(args: list[str], env: dict[str, str], timeout: float) -> dict:
    env = {**env, "BENCH_TMP": str(Path(env["AIRLOCK_DATA_DIR"]).parent / "scratch")}
    proc = subprocess.run([sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    lines = [line for line in proc.stdout.strip().splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"exit {proc.returncode}: {(proc.stderr or proc.stdout)[-1500:]}")
    return json.loads(lines[-1])


def redis_env(data_dir: Path) -> tuple[dict[str, str], object]:
    """A child's environment on a scratch PostgreSQL database and Redis (its own queue namespace)."""
    from bench.api import Database

    data_dir.mkdir(parents=True, exist_ok=True)
    db = Database(data_dir)
    if not db.pg:
        raise RuntimeError("PostgreSQL is not answering")
    env = embedded_env(
        data_dir,
        DATABASE_URL=db.url,
        REDIS_URL=os.environ.get("REDIS_URL", REDIS),
        DJANGO_SETTINGS_MODULE="config.settings.base",
        AIRLOCK_KEY_PREFIX=f"bench-{os.getpid()}-{data_dir.name}",
    )
    return env, db


def bench_pipeline(quick: bool, tmp: Path) -> dict:
    results = run_child(
        ["bench/pipeline_overhead.py", *(["--quick"] if quick else [])], embedded_env(tmp / "pipeline"), 900
    )
    try:  # the embedded figures stand even when PostgreSQL or Redis is missing
        env, db = redis_env(tmp / "pipeline_redis")
        try:
            redis = run_child(
                ["bench/pipeline_overhead.py", "--redis", "--processes", "2", *(["--quick"] if quick else [])],
                env,
                1200,
            )
        finally:
            db.drop()  # type: ignore[attr-defined]
    except Exception as exc:  # noqa: BLE001
        results["errors.pipeline_redis"] = f"{type(exc).__name__}: {exc}"[-2000:]
        return results
    results.update({f"{key}_redis": value for key, value in redis.items()})
    return results


def bench_scaling(quick: bool, tmp: Path, most: int = 0) -> dict:
    env, db = redis_env(tmp / "scaling")
    try:
        return run_child(
            [
                "bench/pipeline_overhead.py",
                "--redis",
                "--scaling",
                *(["--max-processes", str(most)] if most else []),
                *(["--quick"] if quick else []),
            ],
            env,
            3600,
        )
    finally:
        db.drop()  # type: ignore[attr-defined]


def bench_thumbnails(quick: bool, tmp: Path) -> dict:
    return run_child(["bench/thumbnails.py", *(["--quick"] if quick else [])], embedded_env(tmp / "thumbs"), 900)


def bench_heic(quick: bool, tmp: Path) -> dict:
    return run_child(["bench/heic_bench.py", *(["--quick"] if quick else [])], embedded_env(tmp / "heic"), 900)


def bench_media(quick: bool, tmp: Path) -> dict:
    return run_child(["bench/media_bench.py", *(["--quick"] if quick else [])], embedded_env(tmp / "media"), 900)


def bench_video1g(quick: bool, tmp: Path) -> dict:
    return run_child(["bench/video1g_bench.py", *(["--quick"] if quick else [])], embedded_env(tmp / "video1g"), 2400)


def bench_video1g_s3(quick: bool, tmp: Path) -> dict:
    return run_child(
        ["bench/video1g_bench.py", "--s3", *(["--quick"] if quick else [])], embedded_env(tmp / "video1g_s3"), 2400
    )


def bench_ttr(quick: bool, tmp: Path) -> dict:
    return run_child(["bench/time_to_ready.py", *(["--quick"] if quick else [])], embedded_env(tmp / "ttr"), 1200)


def bench_api(quick: bool, tmp: Path) -> dict:
    return run_child(["bench/api.py", *(["--quick"] if quick else [])], embedded_env(tmp / "api"), 1800)


def bench_memory(quick: bool, tmp: Path) -> dict:
    return run_child(["bench/memory.py"], embedded_env(tmp / "memory"), 900)


def bench_sweeper(quick: bool, tmp: Path) -> dict:
    script = REPO / "bench" / "sweeper_throughput.py"
    if not script.exists():
        raise RuntimeError("bench/sweeper_throughput.py does not exist yet")
    n = 10_000 if quick else 100_000
    env = embedded_env(
        tmp / "sweeper",
        DATABASE_URL=f"{PG}/airlock_sweepbench_{os.getpid()}",
        DJANGO_SETTINGS_MODULE="config.settings.base",
    )
    data = run_child([str(script), "--n", str(n)], env, 3600)
    hooked = run_child([str(script), "--n", str(n // 2), "--noise", "0", "--endpoints", "1"], env, 3600)
    return {
        "sweeper_vs_bare_delete_ratio": data.get("sweep_vs_bare_delete_ratio"),
        "sweeper_vs_bare_delete_ratio_with_webhooks": hooked.get("sweep_vs_bare_delete_ratio"),
        "sweeper_rows_per_s": data.get("rows_per_s"),
        "sweeper_bare_rows_per_s": data.get("bare_rows_per_s"),
        "sweeper_bare_phase_seconds": data.get("bare_phase_seconds"),
        "sweeper_storage_deletes": data.get("storage_deletes"),
        "sweeper_expired_rows": data.get("expired_rows"),
        "sweeper_other_rows": data.get("other_rows"),
        "sweeper_reaped": data.get("reaped"),
        "sweeper_left_behind": data.get("left_behind"),
        "sweeper_committed_intact": data.get("committed_intact"),
        "sweeper_index_used": data.get("index_used"),
        "sweeper_database": data.get("database"),
        "sweeper_explain": (data.get("explain") or "")[:600],
        "sweeper_seconds": data.get("seconds"),
    }


def bench_quotas(quick: bool, tmp: Path) -> dict:
    return run_child(["bench/quotas_bench.py", *(["--quick"] if quick else [])], embedded_env(tmp / "quotas"), 1800)


def bench_client_tokens(quick: bool, tmp: Path) -> dict:
    args = ["bench/client_token_bench.py", *(["--quick"] if quick else [])]
    return run_child(args, embedded_env(tmp / "client_tokens"), 1800)


def bench_serve(quick: bool, tmp: Path) -> dict:
    return run_child(["bench/serve_bench.py", *(["--quick"] if quick else [])], embedded_env(tmp / "serve"), 1800)


def bench_webhooks(quick: bool, tmp: Path) -> dict:
    return run_child(["bench/webhooks_bench.py", *(["--quick"] if quick else [])], embedded_env(tmp / "webhooks"), 1200)


def bench_tus(quick: bool, tmp: Path) -> dict:
    return run_child(["bench/tus_bench.py", *(["--quick"] if quick else [])], embedded_env(tmp / "tus"), 1200)


def bench_slow(quick: bool, tmp: Path) -> dict:
    return run_child(["bench/slow_clients.py", *(["--quick"] if quick else [])], embedded_env(tmp / "slow"), 900)


def bench_burst(quick: bool, tmp: Path) -> dict:
    return run_child(["bench/burst_s3.py", *(["--quick"] if quick else [])], embedded_env(tmp / "burst"), 1200)


def bench_fair(quick: bool, tmp: Path) -> dict:
    return run_child(["bench/fair_bench.py", *(["--quick"] if quick else [])], embedded_env(tmp / "fair"), 2400)


def bench_rescan(quick: bool, tmp: Path) -> dict:
    return run_child(["bench/rescan_bench.py", *(["--quick"] if quick else [])], embedded_env(tmp / "rescan"), 1200)


def bench_variants(quick: bool, tmp: Path) -> dict:
    return run_child(["bench/variant_bench.py", *(["--quick"] if quick else [])], embedded_env(tmp / "variants"), 1800)


def bench_variant_flood(quick: bool, tmp: Path) -> dict:
    return run_child(
        ["bench/variant_flood_bench.py", *(["--quick"] if quick else [])], embedded_env(tmp / "variant_flood"), 1800
    )


def bench_readyz(quick: bool, tmp: Path) -> dict:
    return run_child(["bench/readyz_bench.py", *(["--quick"] if quick else [])], embedded_env(tmp / "readyz"), 900)


def bench_r2(quick: bool, tmp: Path) -> dict:
    return run_child(["bench/r2_bench.py", *(["--quick"] if quick else [])], embedded_env(tmp / "r2"), 1200)


def bench_album(quick: bool, tmp: Path) -> dict:
    return run_child(["bench/album_bench.py", *(["--quick"] if quick else [])], embedded_env(tmp / "album"), 3600)


def bench_transcode(quick: bool, tmp: Path) -> dict:
    return run_child(
        ["bench/transcode_bench.py", *(["--quick"] if quick else [])], embedded_env(tmp / "transcode"), 5400
    )


def bench_outages(quick: bool, tmp: Path) -> dict:
    return run_child(["bench/outage_bench.py", *(["--quick"] if quick else [])], embedded_env(tmp / "outages"), 1800)


def bench_redis(quick: bool, tmp: Path) -> dict:
    """Redis commands per photo on a redis-server of the bench's own (it starts one), PostgreSQL scratch database."""
    env, db = redis_env(tmp / "redis_count")
    try:
        return run_child(["bench/redis_bench.py", *(["--quick"] if quick else [])], env, 900)
    finally:
        db.drop()  # type: ignore[attr-defined]


def bench_guest(quick: bool, tmp: Path) -> dict:
    return run_child(["bench/guest_bench.py", *(["--quick"] if quick else [])], embedded_env(tmp / "guest"), 3600)


def bench_capacity(quick: bool, tmp: Path) -> dict:
    """A photo's statements and commits (PostgreSQL + Redis) and S3 requests (moto), from bench/capacity.py."""
    keys = ("db_statements_per_photo", "db_commits_per_photo", "s3_requests_per_photo", "s3_operations_per_photo")
    results: dict = {}
    for name, extra in (("capacity", []), ("capacity_s3", ["--s3"])):
        env, db = redis_env(tmp / name)
        try:
            got = run_child(["bench/capacity.py", "--quick", "--kinds", "photo", *extra], env, 1200)
        finally:
            db.drop()  # type: ignore[attr-defined]
        results.update({key: got[key] for key in keys if key in got})
    return results


BENCHES = {
    "pipeline": bench_pipeline,
    "capacity": bench_capacity,
    "thumbnails": bench_thumbnails,
    "heic": bench_heic,
    "media": bench_media,
    "video1g": bench_video1g,
    "video1g_s3": bench_video1g_s3,
    "ttr": bench_ttr,
    "api": bench_api,
    "sweeper": bench_sweeper,
    "memory": bench_memory,
    "serve": bench_serve,
    "webhooks": bench_webhooks,
    "tus": bench_tus,
    "quotas": bench_quotas,
    "client_tokens": bench_client_tokens,
    "slow": bench_slow,
    "burst": bench_burst,
    "fair": bench_fair,
    "rescan": bench_rescan,
    "variants": bench_variants,
    "variant_flood": bench_variant_flood,
    "readyz": bench_readyz,
    "r2": bench_r2,
    "album": bench_album,
    "transcode": bench_transcode,
    "outages": bench_outages,
    "redis": bench_redis,
    "guest": bench_guest,
}


def fmt(value: object) -> str:
    if value is None:
        return "error"
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".") if abs(value) < 100 else f"{value:,.0f}"
    return str(value)


def table(results: dict) -> str:
    lines = ["| figure | value | goal | |", "|---|---|---|---|"]
    for key, goal, check in GOALS:
        value = results.get(key)
        verdict = ""
        if check is not None and value is not None:
            verdict = "ok" if check(value) else "MISSED"
        elif check is not None:
            verdict = "n/a"
        lines.append(f"| `{key}` | {fmt(value)} | {goal} | {verdict} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer files, rows and runs (< 5 minutes)")
    parser.add_argument("--only", default="", help="comma-separated subset of " + ",".join(BENCHES))
    parser.add_argument(
        "--scaling",
        action="store_true",
        help="only the scaling curve: 1..N rundramatiq processes on PostgreSQL + Redis",
    )
    parser.add_argument("--max-processes", type=int, default=0, help="N for --scaling (default: cores)")
    args = parser.parse_args()
    if args.scaling:
        BENCHES["scaling"] = lambda quick, tmp: bench_scaling(quick, tmp, args.max_processes)
        args.only = "scaling"
    chosen = [name for name in BENCHES if not args.only or name in args.only.split(",")]

    started = time.monotonic()
    facts = machine()
    results: dict[str, object] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "mode": "quick" if args.quick else "full",
        "run.benchmarks": ",".join(chosen) if args.only else "all",
        "machine": f"{facts['cores']} cores, {facts['cpu_model']}",
        **flatten(facts, "machine"),
    }
    for key in REQUIRED:
        results[key] = None
    with tempfile.TemporaryDirectory(prefix="airlock-bench-") as tmp:
        for name in chosen:
            t0 = time.monotonic()
            print(f"== {name} ...", file=sys.stderr, flush=True)
            try:
                results.update(flatten(BENCHES[name](args.quick, Path(tmp))))
            except Exception as exc:  # noqa: BLE001 - one failing benchmark must not lose the others
                results[f"errors.{name}"] = f"{type(exc).__name__}: {exc}"[-2000:]
                for key in OWN_KEYS.get(name, []):
                    results[key] = None
                print(f"   {name} failed: {exc}"[:500], file=sys.stderr)
            results[f"seconds.{name}"] = round(time.monotonic() - t0, 1)
            print(f"   {name} done in {results[f'seconds.{name}']}s", file=sys.stderr, flush=True)
    results["seconds.total"] = round(time.monotonic() - started, 1)
    if args.only and RESULTS.exists():  # a partial run updates the previous results
        previous = json.loads(RESULTS.read_text())
        for name in chosen:  # an error of an earlier run of a benchmark that now succeeded is stale
            if f"errors.{name}" not in results:
                previous.pop(f"errors.{name}", None)
        previous.update({k: v for k, v in results.items() if v is not None or k not in previous})
        for key in stale_keys(previous, results):
            del previous[key]
        results = previous
    RESULTS.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    report.write(results)  # docs/performance.md and the README say what results.json holds
    print(table(results))
    if args.scaling:
        for key in sorted(k for k in results if k.startswith("scaling_")):
            print(f"{key}: {results[key]}")
    print(
        f"\n{results['machine']}, {results['date']}, {results['mode']} run, {results['seconds.total']}s; "
        f"written to {RESULTS.relative_to(REPO)}"
    )


if __name__ == "__main__":
    main()
