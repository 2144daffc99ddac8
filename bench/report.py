#!/usr/bin/env python
"""Write the figures of bench/results.json into docs/performance.md and the README.

    .venv/bin/python bench/report.py            # rewrite the generated parts
    .venv/bin/python bench/report.py --check    # exit 1 if a document disagrees with results.json

Each document holds its generated part between two marker comments; everything
outside them is written by hand. tests/docs/test_performance_table.py fails when a
generated part and bench/results.json disagree, so run this after every bench run
that changes results.json (bench/run.py does it after writing results.json).
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results.json"
PERFORMANCE = REPO / "docs" / "performance.md"
README = REPO / "README.md"

Results = dict[str, object]


def fmt(value: object) -> str:
    """3 significant decimals below 100, thousands separators above; yes/no for booleans."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if abs(value) >= 100:
            return f"{value:,.0f}"
        return f"{value:.3f}".rstrip("0").rstrip(".")
    return str(value)


def per_core(results: Results, key: str) -> float | None:
    value, cores = results.get(key), results.get("machine.cores")
    if isinstance(value, (int, float)) and isinstance(cores, int) and cores:
        return round(value / cores, 1)
    return None


# (what a user gets, the results.json keys shown side by side, unit); a key may be a
# function of the results for a figure derived from them.
Key = str | Callable[[Results], object]
SECTIONS: list[tuple[str, list[tuple[str, tuple[Key, ...], str]]]] = [
    (
        "Time to ready",
        [
            (
                "a small photo (640×480 JPEG), upload complete → `ready`, idle `serve`, p50 / p99",
                ("time_to_ready_p50_s", "time_to_ready_p99_s"),
                "s",
            ),
            ("one file after a quiet second, `rundramatiq` on PostgreSQL + Redis, p50", ("ttr_idle_p50_redis_s",), "s"),
            (
                "accepted files while twice the capacity is offered, intents shed beyond the backlog, p99",
                ("time_to_ready_overload.p99_s",),
                "s",
            ),
            ("a 12 MP photo while two video transcodes run, p99", ("ttr_p99_during_transcodes_s",), "s"),
            (
                "a cold 1280 px (`medium`) variant of a 12 MP photo, p50 / p99",
                ("variant_cold_p50_s", "variant_cold_p99_s"),
                "s",
            ),
            ("a warm variant ÷ a download of the same bytes (speed)", ("variant_warm_vs_download_ratio",), ""),
        ],
    ),
    (
        "Throughput",
        [
            (
                "files/s per core: 12 MP photos, PNG screenshots and 20-page PDFs, embedded `serve` / "
                "`rundramatiq` on PostgreSQL + Redis",
                (lambda r: per_core(r, "pipeline_files_per_s"), lambda r: per_core(r, "pipeline_files_per_s_redis")),
                "files/s",
            ),
            (
                "pipeline time per file ÷ the bare steps (sniff, scan, decode) in one process, embedded",
                ("pipeline_overhead_ratio",),
                "",
            ),
            (
                "÷ the bare steps in one process per core, embedded / `rundramatiq`",
                ("pipeline_vs_bare_parallel_ratio", "pipeline_vs_bare_parallel_ratio_redis"),
                "",
            ),
            (
                "one file at a time ÷ the bare steps in one process, embedded / `rundramatiq`",
                ("pipeline_serial_overhead_ratio", "pipeline_serial_overhead_ratio_redis"),
                "",
            ),
            (
                "one file at a time ÷ the same bare steps, each decode in a freshly forked confined sandbox job, "
                "embedded / `rundramatiq`",
                ("pipeline_serial_overhead_vs_confined_ratio", "pipeline_serial_overhead_vs_confined_ratio_redis"),
                "",
            ),
            (
                "sandboxed thumbnail speed ÷ plain Pillow in process / ÷ pyvips",
                ("thumbnail_vs_pillow_plain_ratio", "thumbnail_vs_pyvips_ratio"),
                "",
            ),
            (
                "a 12 MP HEIC photo, sandboxed time ÷ the same pillow-heif calls in process",
                ("heic_thumbnail_vs_bare_ratio",),
                "",
            ),
            (
                "a 1080p clip's probe and poster, sandboxed time ÷ the same PyAV calls in process",
                ("media_probe_poster_vs_bare_pyav_ratio",),
                "",
            ),
            (
                "a video's web rendition, time ÷ the same PyAV transcode in process",
                ("transcode_vs_bare_pyav_ratio",),
                "",
            ),
            ("size of the large video below", ("video_1gib.file_mib",), "MiB"),
            (
                "the large video, upload complete → `ready` ÷ bare scan, probe, poster and remux, "
                "local storage / S3 (moto)",
                ("video_1gib_pipeline_vs_bare_steps_ratio", "video_1gib_pipeline_vs_bare_steps_ratio_s3"),
                "",
            ),
            (
                "the same on S3 ÷ the bare steps plus one download and one upload of the video",
                ("video_1gib_pipeline_vs_bare_steps_plus_transfer_ratio_s3",),
                "",
            ),
        ],
    ),
    (
        "Memory",
        [
            (
                "worker memory growth while the large video goes to `ready`, local storage / S3",
                ("video_1gib_worker_rss_growth_mb", "video_1gib_worker_rss_growth_mb_s3"),
                "MB",
            ),
            ("peak RSS over the hostile corpus, worker / sandbox", ("worker_peak_rss_mb", "sandbox_peak_rss_mb"), "MB"),
            (
                "`serve`'s memory growth while it streams a ref's album as one ZIP",
                ("album_zip_worker_rss_growth_mb",),
                "MB",
            ),
            ("`serve`'s memory growth over a 15 s soak of 50 clients", ("soak.rss_growth_pct",), "%"),
        ],
    ),
    (
        "API and serving",
        [
            (
                "requests/s ÷ a bare DRF view making one query (`gunicorn -w 2`, PostgreSQL): "
                "intent / status / download",
                (
                    "api_intent_vs_bare_insert_ratio",
                    "api_status_vs_bare_select_ratio",
                    "api_download_vs_bare_file_ratio",
                ),
                "",
            ),
            (
                "queries per request: intent / status / download",
                (
                    "api_queries_per_request.intent",
                    "api_queries_per_request.status",
                    "api_queries_per_request.download",
                ),
                "",
            ),
            ("a list of 20 makes as many queries as a list of 1", ("api_list_queries_constant",), ""),
            (
                "status reads/s, `serve` ÷ `gunicorn -w 2`, PostgreSQL / SQLite",
                ("serve_vs_gunicorn_status_ratio", "serve_vs_gunicorn_embedded_ratio"),
                "",
            ),
            ("intents/s with a tenant quota ÷ without", ("quota_intent_on_vs_off_ratio",), ""),
            (
                "intents/s with a client token ÷ with the service token",
                ("client_token_vs_service_token_intent_ratio",),
                "",
            ),
            ("5xx answers in a 15 s soak of 50 clients on `serve`", ("soak.responses_5xx",), ""),
            ("CPU for 100 clients waiting 30 s on `?wait=30`", ("waiters_cpu_s_per_100x30s",), "s"),
            (
                "`/readyz`, 30 clients at once on PostgreSQL + Redis + S3: p99 in s / 503 answers",
                ("readyz_p99_s", "readyz_503"),
                "",
            ),
            (
                "500 slow sockets open: `/healthz` p99 / an authenticated GET p99",
                ("slow_clients_healthz_p99_s", "slow_clients_auth_get_p99_s"),
                "s",
            ),
        ],
    ),
    (
        "Uploads and downloads",
        [
            ("tus in 5 MiB PATCHes ÷ one PUT of the same 30 MiB file (speed)", ("tus_vs_put_throughput_ratio",), ""),
            ("tus upload speed", ("tus_upload_mib_per_s",), "MiB/s"),
            (
                "200 S3 uploads at once under two CPU hogs: share answered / p99 in s",
                ("burst_s3_200_clients_ok_ratio", "burst_s3_200_clients_p99_s"),
                "",
            ),
            (
                "a ref's album as one ZIP ÷ reading the same files from disk (speed)",
                ("album_zip_vs_disk_read_ratio",),
                "",
            ),
            (
                "200 guests × 5 photos through one upload link at once, PostgreSQL + Redis: share ready / "
                "busy answers waited out (503) / 429s not waited out",
                ("guest_burst_ok_ratio", "guest_burst.responses_5xx", "guest_burst.unretried_429"),
                "",
            ),
            ("the upload link's page on a phone-sized Chromium, first paint, median", ("guest_page_load_s",), "s"),
        ],
    ),
    (
        "What a file costs the shared services",
        [
            (
                "a 12 MP photo's Redis commands sent / executed (scripts' commands included), idle polling aside",
                ("redis_commands_per_photo", "redis_commands_executed_per_photo"),
                "",
            ),
            ("an idle worker process's Redis commands per second", ("redis_idle_commands_per_s",), ""),
            (
                "a 12 MP photo's database statements / commits, upload + worker, PostgreSQL + Redis",
                ("db_statements_per_photo", "db_commits_per_photo"),
                "",
            ),
            ("a 12 MP photo's S3 requests of ours (moto; the client's upload aside)", ("s3_requests_per_photo",), ""),
        ],
    ),
    (
        "One tenant does not slow another",
        [
            (
                "another tenant's file while one has 1,000 queued, p99, embedded / PostgreSQL + Redis",
                ("ttr_p99_other_tenant_under_burst_s", "ttr_p99_other_tenant_under_burst_redis_s"),
                "s",
            ),
            (
                "another tenant's cold variant while one asks for 36 at once, p99",
                ("variant_flood_other_tenant_p99_s",),
                "s",
            ),
            (
                "status reads/s during a rescan walk ÷ a bare view's",
                ("api_status_vs_bare_select_ratio_during_rescan",),
                "",
            ),
            ("the rescan walk's rate ÷ its budget", ("rescan_budget_achieved_ratio",), ""),
        ],
    ),
    (
        "Lifecycle and events",
        [
            (
                "sweep ÷ a bare SELECT, storage deletes and DELETE of the same rows (speed, PostgreSQL), "
                "without / with a webhook endpoint",
                ("sweeper_vs_bare_delete_ratio", "sweeper_vs_bare_delete_ratio_with_webhooks"),
                "",
            ),
            ("rows swept per second", ("sweeper_rows_per_s",), ""),
            ("signed webhook deliveries per second to one receiver (embedded)", ("webhook_delivery_events_per_s",), ""),
            ("rescans per second (YARA only)", ("rescan_files_per_s",), ""),
            (
                "storage events applied per second: R2 over the Queues pull API / S3 over SQS",
                ("r2_consumer_events_per_s", "sqs_consumer_events_per_s"),
                "",
            ),
        ],
    ),
    (
        "Recovery",
        [
            (
                "a 40-photo burst's last file `ready` after its outage ends: Redis lost / connections cut / "
                "clamd down / a worker killed",
                (
                    "outage_recovery.redis_s",
                    "outage_recovery.database_s",
                    "outage_recovery.clamd_s",
                    "outage_recovery.worker_s",
                ),
                "s",
            ),
        ],
    ),
]


def value(results: Results, key: Key) -> object:
    return key(results) if callable(key) else results.get(key)


def figure(results: Results, keys: tuple[Key, ...], unit: str) -> str:
    text = " / ".join(fmt(value(results, key)) for key in keys)
    return f"{text} {unit}".strip() if unit else text


def key_names(keys: tuple[Key, ...]) -> str:
    return ", ".join(f"`{key}`" for key in keys if isinstance(key, str)) or "derived"


def about(results: Results) -> str:
    load = results.get("machine.loadavg_at_start")
    load_text = ", ".join(fmt(x) for x in load) if isinstance(load, list) else "—"
    return (
        f"Machine: {results.get('machine', '—')}, Python {results.get('machine.python', '—')}; "
        f"the latest run, {results.get('mode', '—')}, of {results.get('date', '—')} "
        f"(benchmarks: {results.get('run.benchmarks', '—')}), load average {load_text} at its start. "
        "A run of some benchmarks (`--only`) replaces only their figures: the others are from earlier "
        "runs (git log bench/results.json); some record their date and load average beside them."
    )


def performance_table(results: Results) -> str:
    lines = [about(results), ""]
    for title, rows in SECTIONS:
        lines += [f"**{title}**", "", "| what | measured | key in `bench/results.json` |", "|---|---|---|"]
        lines += [f"| {what} | {figure(results, keys, unit)} | {key_names(keys)} |" for what, keys, unit in rows]
        lines.append("")
    return "\n".join(lines).rstrip("\n")


def readme_paragraph(results: Results) -> str:
    cores = results.get("machine.cores")
    quick = " (a quick run's; the full run uses 1,000 MiB)" if results.get("video_1gib.quick") else ""
    text = (
        f"On {cores} cores, a mix of 12 MP photos, screenshots and 20-page PDFs goes through at "
        f"{fmt(per_core(results, 'pipeline_files_per_s'))} files/s per core (embedded `serve`; "
        f"{fmt(per_core(results, 'pipeline_files_per_s_redis'))} with `rundramatiq` on PostgreSQL + Redis). "
        f"A small photo is `ready` {fmt(results.get('time_to_ready_p50_s'))} s after its upload completes "
        f"(p99 {fmt(results.get('time_to_ready_p99_s'))} s), a cold gallery size of a 12 MP photo takes "
        f"{fmt(results.get('variant_cold_p99_s'))} s (p99), and another tenant's file waits "
        f"{fmt(results.get('ttr_p99_other_tenant_under_burst_s'))} s (p99) while one tenant has 1,000 queued. "
        f"A video streams through the worker: its memory grows by "
        f"{fmt(results.get('video_1gib_worker_rss_growth_mb'))} MB while a "
        f"{fmt(results.get('video_1gib.file_mib'))} MiB video{quick} goes to `ready` "
        f"({fmt(results.get('video_1gib_worker_rss_growth_mb_s3'))} MB with S3 storage)."
    )
    return textwrap.fill(text, width=78, break_long_words=False, break_on_hyphens=False)


# (document, begin marker, end marker, renderer)
PARTS: list[tuple[Path, str, str, Callable[[Results], str]]] = [
    (PERFORMANCE, "<!-- bench/report.py: figures -->", "<!-- bench/report.py: end -->", performance_table),
    (README, "<!-- bench/report.py: summary -->", "<!-- bench/report.py: end -->", readme_paragraph),
]


def generated(text: str, begin: str, end: str) -> str:
    """The part of `text` between the markers."""
    if begin not in text:
        raise ValueError(f"no {begin} marker")
    inside = text.split(begin, 1)[1]
    if end not in inside:
        raise ValueError(f"no {end} after {begin}")
    return inside.split(end, 1)[0].strip("\n")


def rewrite(text: str, begin: str, end: str, part: str) -> str:
    head, rest = text.split(begin, 1)
    return f"{head}{begin}\n{part}\n{end}{rest.split(end, 1)[1]}"


def stale(results: Results) -> list[str]:
    """The documents whose generated part differs from what `results` gives."""
    return [
        str(path.relative_to(REPO))
        for path, begin, end, render in PARTS
        if generated(path.read_text(encoding="utf-8"), begin, end) != render(results)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a document is stale")
    args = parser.parse_args()
    results = json.loads(RESULTS.read_text())
    if args.check:
        if bad := stale(results):
            sys.exit(f"stale against bench/results.json (run bench/report.py): {', '.join(bad)}")
        return
    write(results)


def write(results: Results) -> None:
    """Rewrite every document's generated part from `results`."""
    for path, begin, end, render in PARTS:
        text = path.read_text(encoding="utf-8")
        path.write_text(rewrite(text, begin, end, render(results)), encoding="utf-8")
        print(f"wrote {path.relative_to(REPO)}", file=sys.stderr)


if __name__ == "__main__":
    main()
