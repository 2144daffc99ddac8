"""Sandbox overhead benchmark (not collected by pytest).

    .venv/bin/python -m tests.sandbox.bench_sandbox

Compares run_job with calling the same decoder in-process (after the same preload and
warm-up the fork server does, so both sides start hot), for a 1x1 PNG and a 12 MP JPEG,
interleaving the two so background load hits both alike; then runs the whole corpus
through run_job and reports the peak job RSS.
"""

from __future__ import annotations

import csv
import io
import resource
import statistics
import tempfile
import time
from pathlib import Path

from PIL import Image

from processing.sandbox import Bounds, run_job, shutdown
from processing.sandbox.images import process
from processing.sandbox.warmup import preload
from tests.sandbox.helpers import corpus_dir

KIND = {"image": "image", "document": "pdf", "archive": "zip"}


def _ms(samples: list[float]) -> str:
    return f"median {statistics.median(samples) * 1000:7.2f} ms (min {min(samples) * 1000:6.2f})"


def _bare_thumbnail(path: Path) -> None:
    with Image.open(path) as im:
        im.thumbnail((256, 256))
        im.convert("RGB").save(io.BytesIO(), "WEBP", quality=80)


def compare(name: str, path: Path, runs: int, tmp: Path, pause: float = 0.0) -> None:
    inproc: list[float] = []
    sandboxed: list[float] = []
    bare: list[float] = []
    for i in range(runs):
        work = tmp / f"{name}-{i}"
        work.mkdir()
        start = time.perf_counter()
        process(path, work, Bounds())
        inproc.append(time.perf_counter() - start)
        start = time.perf_counter()
        _bare_thumbnail(path)
        bare.append(time.perf_counter() - start)
        time.sleep(pause)
        start = time.perf_counter()
        result = run_job("image", path, tmp / f"sb-{name}-{i}")
        sandboxed.append(time.perf_counter() - start)
        assert result.outcome == "ok", result
    ratio = statistics.median(sandboxed) / statistics.median(inproc)
    print(f"{name} (n={runs})")
    print(f"  bare Pillow thumbnail      {_ms(bare)}")
    print(f"  images.process in-process  {_ms(inproc)}")
    print(f"  run_job                    {_ms(sandboxed)}   ratio {ratio:.2f}x")


def _cpu_of_session(path: Path, runs: int, tmp: Path) -> float:
    """CPU of worker + fork server + jobs for one server lifetime with `runs` calls."""
    shutdown()
    before = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    for i in range(runs + 1):  # the first call starts the server
        run_job("image", path, tmp / f"cpu-{path.stem}-{runs}-{i}")
    shutdown()  # the server (and, through it, every job) is only accounted once reaped
    after = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(a.ru_utime + a.ru_stime - b.ru_utime - b.ru_stime for a, b in zip(after, before))


def cpu_per_job(name: str, path: Path, runs: int, tmp: Path) -> None:
    """CPU per run_job (server start/stop subtracted) vs the same decoder in-process."""
    per_call = (_cpu_of_session(path, runs, tmp) - _cpu_of_session(path, 0, tmp)) / runs
    start = time.process_time()
    for i in range(runs):
        work = tmp / f"cpu-in-{name}-{i}"
        work.mkdir()
        process(path, work, Bounds())
    inproc = (time.process_time() - start) / runs
    print(
        f"{name} CPU per call (worker + server + job, n={runs}): run_job {per_call * 1000:.2f} ms,"
        f" in-process {inproc * 1000:.2f} ms, ratio {per_call / inproc:.2f}x"
    )


def corpus_peak_rss(tmp: Path) -> None:
    with open(corpus_dir() / "MANIFEST.tsv", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    peaks = []
    for n, row in enumerate(rows):
        result = run_job(KIND[row["profile"]], corpus_dir() / row["path"], tmp / f"corpus-{n}")
        peaks.append((result.peak_rss_kb or 0, row["path"], result.outcome, result.reason_code))
    peaks.sort(reverse=True)
    print(f"corpus: {len(rows)} files, median job RSS {statistics.median(p[0] for p in peaks)} KB")
    for peak in peaks[:3]:
        print(f"  peak {peak[0]:>7} KB  {peak[1]}  {peak[2]}/{peak[3]}")


def main() -> None:
    preload()  # the in-process side gets the same warm start as the fork server
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        png = tmp / "1x1.png"
        Image.new("RGB", (1, 1), "red").save(png)
        photo = Image.effect_mandelbrot((4000, 3000), (-2.2, -1.2, 1.0, 1.2), 100).convert("RGB")
        photo = Image.blend(photo, Image.effect_noise((4000, 3000), 20).convert("RGB"), 0.3)
        jpeg = tmp / "12mp.jpg"
        photo.save(jpeg, quality=90)
        run_job("image", png, tmp / "warm")  # server start is not per-call overhead
        compare("1x1 PNG", png, 50, tmp)
        compare("1x1 PNG paced", png, 50, tmp, pause=0.02)
        compare("12 MP JPEG", jpeg, 30, tmp)
        cpu_per_job("1x1 PNG", png, 200, tmp)
        cpu_per_job("12 MP JPEG", jpeg, 30, tmp)
        corpus_peak_rss(tmp)
    shutdown()


if __name__ == "__main__":
    main()
