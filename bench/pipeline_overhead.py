#!/usr/bin/env python
"""Pipeline overhead: files/s through the whole pipeline against the bare steps, same files, same run.

    python bench/pipeline_overhead.py [--quick]      (bench/run.py runs it with a scratch AIRLOCK_DATA_DIR)

Pipeline: intent → signed PUT into storage → intake → scan → derive (sandboxed
child) → ready, driven inline in one thread as the actors would call it
(run_pipeline-style: pipeline.start_and_intake, then run_step per step), on the
embedded database (SQLite in the scratch dir) and local storage.
Bare: the same work called directly in the same process: sniff the first
4,100 bytes, scan with the same scanners, decode with the same decoder
function in-process (images.process / pdfs.process), no database, no storage,
no sandbox. Rounds alternate pipeline/bare so background load hits both.
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    bench_django, emit, make_user, median, r, sample_mix, scratch_dir, timed,
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    bench_django()

    from django.conf import settings

    from attachments.models import Attachment
    from attachments.services.intents import upload_intent_create
    from attachments.services.uploads import upload_content_receive
    from attachments.signing import upload_token
    from processing import pipeline
    from processing.sandbox import Bounds, shutdown
    from processing.sandbox import images as image_decoder
    from processing.sandbox import pdfs as pdf_decoder
    from processing.scanners import scan_all, scanners_from_settings
    from processing.sniff import detect_type

    rounds = 3 if args.quick else 5
    tmp = scratch_dir("airlock-bench-pipe-")
    mix = sample_mix(tmp / "mix", photos=2 if args.quick else 4, screenshots=2 if args.quick else 4,
                     pdfs=1 if args.quick else 2)
    user = make_user()
    scanners = scanners_from_settings()
    bounds = Bounds(max_pixels=settings.AIRLOCK_MAX_PIXELS, max_pdf_pages=settings.AIRLOCK_MAX_PDF_PAGES,
                    max_text_chars=settings.AIRLOCK_MAX_TEXT_CHARS)

    phases: dict[str, list[float]] = {}
    import time as _time

    import processing.sandbox_config as sandbox_config

    real_sandboxed = sandbox_config.run_sandboxed

    def sandboxed(*a):
        started = _time.perf_counter()
        try:
            return real_sandboxed(*a)
        finally:
            phases.setdefault("derive_sandbox_job", []).append(_time.perf_counter() - started)

    sandbox_config.run_sandboxed = sandboxed

    def mark(name: str, started: float) -> float:
        now = _time.perf_counter()
        phases.setdefault(name, []).append(now - started)
        return now

    def through_pipeline(item: dict) -> None:
        data = item["path"].read_bytes()
        t = _time.perf_counter()
        intent = upload_intent_create(user=user, profile_name=item["profile"], filename=item["path"].name,
                                      size=len(data), content_type=item["content_type"])
        pk = intent.attachment.pk
        t = mark("intent", t)
        upload_content_receive(attachment_id=pk, token=upload_token(pk),
                               chunks=lambda: (data[i:i + 65536] for i in range(0, len(data), 65536)),
                               content_length=len(data))
        t = mark("put", t)
        pipeline.start_and_intake(pk)
        t = mark("intake", t)
        for _ in range(4):
            row = Attachment.objects.only("status", "lease_token", "step").get(pk=pk)
            if row.status != "processing":
                break
            pipeline.run_step(pk, row.lease_token, row.step)
            t = mark(row.step, t)
        status = Attachment.objects.filter(pk=pk).values_list("status", flat=True).get()
        assert status == "ready", (item["path"].name, status)

    def bare(item: dict) -> None:
        path = item["path"]
        with open(path, "rb") as fh:
            detect_type(fh.read(4100))

        def chunks():
            with open(path, "rb") as fh:
                yield from iter(lambda: fh.read(65536), b"")  # the gateway's chunk size

        assert all(v.outcome == "clean" for v in scan_all(scanners, chunks))
        work = tmp / "bare" / uuid.uuid4().hex
        work.mkdir(parents=True)
        if item["profile"] == "image":
            image_decoder.process(path, work, bounds)
        else:
            pdf_decoder.process(path, work, bounds)

    def flush_broker() -> None:
        import dramatiq

        dramatiq.get_broker().flush_all()  # the in-process broker's queued doorbells: nobody consumes them

    for item in mix:  # warm-up: imports, the sandbox's fork server, scanner rules
        through_pipeline(item)
        bare(item)
    flush_broker()
    phases.clear()

    ratios, pipe_fps, bare_fps = [], [], []
    per_kind: dict[str, dict[str, list[float]]] = {}
    for n in range(rounds):
        order = ("pipeline", "bare") if n % 2 == 0 else ("bare", "pipeline")
        times = {"pipeline": 0.0, "bare": 0.0}
        for side in order:
            for item in mix:
                took = timed(lambda: (through_pipeline if side == "pipeline" else bare)(item))
                times[side] += took
                per_kind.setdefault(item["kind"], {"pipeline": [], "bare": []})[side].append(took)
        flush_broker()
        ratios.append(times["pipeline"] / times["bare"])
        pipe_fps.append(len(mix) / times["pipeline"])
        bare_fps.append(len(mix) / times["bare"])
    shutdown()
    emit({
        "pipeline_overhead_ratio": r(median(ratios)),
        "pipeline_files_per_s": r(median(pipe_fps)),
        "bare_steps_files_per_s": r(median(bare_fps)),
        "pipeline_overhead_ratio_runs": [r(x) for x in ratios],
        "pipeline_overhead_by_kind": {
            kind: {"pipeline_ms": r(median(v["pipeline"]) * 1000, 1), "bare_ms": r(median(v["bare"]) * 1000, 1),
                   "ratio": r(median(v["pipeline"]) / median(v["bare"]))}
            for kind, v in per_kind.items()
        },
        "pipeline_phase_ms_median": {k: r(median(v) * 1000, 1) for k, v in phases.items()},
        "pipeline_mix": {kind: sum(1 for m in mix if m["kind"] == kind) for kind in per_kind},
        "pipeline_mode": "inline run_pipeline-style calls in one thread (intent, signed PUT, intake, scan, "
                         "sandboxed derive, ready); embedded SQLite + local storage in a scratch dir",
        "pipeline_scanners": [s.name for s in scanners],
        "pipeline_rounds": rounds,
    })


if __name__ == "__main__":
    main()
