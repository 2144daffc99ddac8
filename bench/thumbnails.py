#!/usr/bin/env python
"""Thumbnail step: our image step against plain Pillow and pyvips on the same images, same run.

    python bench/thumbnails.py [--quick]

Ours, two ways: processing.sandbox.run_job("image") (what the pipeline runs:
a forked, confined job; probe, bound, 256 px WebP thumbnail, lossless
metadata-free sanitized copy) and the in-process decoder underneath it
(processing.sandbox.images.process). Baselines: plain Pillow (open, thumbnail,
save WebP) and pyvips (Image.thumbnail, save WebP), both to 256 px at quality 80.
Images: 12 MP JPEG photos and PNG screenshots. Methods are interleaved within
each round; throughput = images / summed time; ratios are ours ÷ baseline per
round, median over rounds. pyvips runs with its default thread pool and again
with one thread (per-core comparison; Pillow and our step use one core).

zlib: the baselines run as pip installs them: Pillow with the system zlib,
pyvips with the zlib-ng its wheel bundles. Our step's jobs load zlib-ng too when
scripts/build-zlib-ng.sh has built it (that is part of the step); in_process runs
our decoder in this process, on the system zlib, so in_process vs pillow_plain is
the same-library comparison. thumbnail_zlib records which library each side had.

Every timed call starts after a short settle pause: run_job leaves work behind it
(the finished job process tearing down, the server forking and warming the next
spare, ~7 ms of CPU) and without the pause that work landed on whichever method
came next in the shuffled order, a baseline as often as ours. The CPU all of it
costs is not hidden: thumbnail_cpu_ms_per_image counts, per method, the CPU of
the calling process and, for run_job, of the fork server and every job process
(including the spare prepared for the next job).
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import io
import random
import resource
import shutil
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import emit, median, r, sample_mix, scratch_dir, timed, zlib_versions  # noqa: E402

SETTLE_SECONDS = 0.02  # before every timed call: see the module docstring


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()

    from PIL import Image

    from processing.sandbox import Bounds, run_job, shutdown
    from processing.sandbox import images as image_decoder
    from processing.sandbox.runner import server_cpu_seconds
    from processing.sandbox.warmup import preload

    tmp = scratch_dir("airlock-bench-thumb-")
    mix = sample_mix(tmp / "mix", photos=2 if args.quick else 4, screenshots=2 if args.quick else 4, pdfs=0)
    rounds = 9  # the median of 5 per-round ratios swung by ±5 % on a shared 2-core machine
    bounds = Bounds()

    def sandboxed(path: Path) -> None:
        result = run_job("image", path, tmp / "sb" / uuid.uuid4().hex)
        assert result.outcome == "ok", result

    def in_process(path: Path) -> None:
        work = tmp / "ip" / uuid.uuid4().hex
        work.mkdir(parents=True)
        image_decoder.process(path, work, bounds)

    def pillow_plain(path: Path) -> None:
        with Image.open(path) as im:
            im.thumbnail((256, 256))
            im.save(io.BytesIO(), "WEBP", quality=80)

    methods = {"run_job": sandboxed, "in_process": in_process, "pillow_plain": pillow_plain}
    pyvips_error = None
    try:
        import pyvips

        default_threads = pyvips.concurrency_get()

        def vips(path: Path) -> None:
            pyvips.Image.thumbnail(str(path), 256).write_to_buffer(".webp[Q=80]")

        def vips_one_thread(path: Path) -> None:
            pyvips.concurrency_set(1)
            try:
                vips(path)
            finally:
                pyvips.concurrency_set(default_threads)

        pyvips.cache_set_max(0)  # no operation cache: every call decodes its file
        methods["pyvips"] = vips
        methods["pyvips_1_thread"] = vips_one_thread
    except Exception as exc:  # noqa: BLE001 - recorded in the results
        pyvips_error = f"{type(exc).__name__}: {exc}"

    zlibs = zlib_versions()
    preload()  # the fork server preloads and warms the decoders; do the same for in-process calls
    for item in mix:
        for fn in methods.values():
            fn(item["path"])

    def own_cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)  # every thread, pyvips' pool too
        return usage.ru_utime + usage.ru_stime

    rng = random.Random(8)
    per_round: dict[str, list[float]] = {name: [] for name in methods}
    per_kind: dict[str, dict[str, list[float]]] = {}
    cpu = dict.fromkeys(methods, 0.0)
    sandbox_cpu_start = server_cpu_seconds() or 0.0
    for _ in range(rounds):
        totals = dict.fromkeys(methods, 0.0)
        for item in mix:
            names = list(methods)
            rng.shuffle(names)
            for name in names:
                time.sleep(SETTLE_SECONDS)
                before = own_cpu()
                took = timed(lambda: methods[name](item["path"]))
                cpu[name] += own_cpu() - before
                totals[name] += took
                per_kind.setdefault(item["kind"], {}).setdefault(name, []).append(took)
        for name, total in totals.items():
            per_round[name].append(len(mix) / total)
    time.sleep(0.2)  # let the last job process exit and be reaped
    cpu["run_job"] += (server_cpu_seconds() or 0.0) - sandbox_cpu_start
    shutdown()
    shutil.rmtree(tmp, ignore_errors=True)  # ~100 MB of derivatives, left behind when run alone

    def ratio(ours: str, base: str) -> float | None:
        if base not in per_round:
            return None
        return r(median(a / b for a, b in zip(per_round[ours], per_round[base])))

    result = {
        "thumbnail_vs_pillow_plain_ratio": ratio("run_job", "pillow_plain"),
        "thumbnail_vs_pyvips_ratio": ratio("run_job", "pyvips"),
        "thumbnail_inprocess_vs_pillow_plain_ratio": ratio("in_process", "pillow_plain"),
        "thumbnail_inprocess_vs_pyvips_ratio": ratio("in_process", "pyvips"),
        "thumbnail_vs_pyvips_1_thread_ratio": ratio("run_job", "pyvips_1_thread"),
        "thumbnail_images_per_s": {name: r(median(v), 2) for name, v in per_round.items()},
        "thumbnail_ms_by_kind": {
            kind: {name: r(median(v) * 1000, 1) for name, v in by.items()} for kind, by in per_kind.items()
        },
        "thumbnail_cpu_ms_per_image": {name: r(total * 1000 / (rounds * len(mix)), 1) for name, total in cpu.items()},
        "thumbnail_mix": {kind: sum(1 for m in mix if m["kind"] == kind) for kind in per_kind},
        "thumbnail_rounds": rounds,
        "thumbnail_zlib": zlibs,
        "pyvips": None
        if pyvips_error
        else f"pyvips {pyvips.__version__}, libvips "
        f"{pyvips.version(0)}.{pyvips.version(1)}.{pyvips.version(2)}, "
        f"{default_threads} threads by default",
    }
    if pyvips_error:
        result["pyvips_error"] = pyvips_error
    emit(result)


if __name__ == "__main__":
    main()
