#!/usr/bin/env python
"""HEIC photos: our sandboxed image step against the same pillow-heif calls in-process, same run.

    python bench/heic_bench.py [--quick]

Ours: processing.sandbox.run_job("image") on a 12 MP HEIC (what the pipeline runs: a
forked, confined job; the container's ispe bounded, the primary image decoded in a
sub-child of the job, a display rendition of at most 2048 px as JPEG and a 256 px WebP
thumbnail written). Bare: the same library calls in this process, written out plainly
(Image.open through pillow-heif's plugin, thumbnail to 2048, JPEG, thumbnail to 256,
WebP), with pillow-heif's options as the sandbox sets them (one decoding thread).
in_process (info): our decoder module called in this process, no sandbox.
Methods are interleaved in a shuffled order within each round, each call after a short
settle pause (see bench/thumbnails.py: a finished job's teardown and the next spare's
warm-up would otherwise land on whichever call came next); ratio = ours / bare time per
round, median over rounds. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import io
import shutil
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import emit, median, paired_rounds, photo_jpeg, r, scratch_dir  # noqa: E402

SETTLE_SECONDS = 0.02


def heic_photo(seed: int, size: tuple[int, int]) -> bytes:
    """A camera-like photo (bench.common.photo_jpeg's pixels) encoded as HEIC by pillow-heif."""
    import pillow_heif
    from PIL import Image

    pillow_heif.register_heif_opener()
    with Image.open(io.BytesIO(photo_jpeg(seed, size))) as im:
        buf = io.BytesIO()
        im.save(buf, "HEIF", quality=80)
    return buf.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()

    from PIL import Image

    from processing.sandbox import Bounds, run_job, shutdown
    from processing.sandbox import images as image_decoder  # sets pillow-heif's options as in the sandbox
    from processing.sandbox.warmup import preload

    tmp = scratch_dir("airlock-bench-heic-")
    size = (4032, 3024)  # a phone's 12 MP
    photos = []
    for i in range(1 if args.quick else 2):
        path = tmp / f"photo-{i}.heic"
        path.write_bytes(heic_photo(200 + i, size))
        photos.append(path)
    rounds = 3 if args.quick else 7
    bounds = Bounds()

    def sandboxed(path: Path) -> None:
        result = run_job("image", path, tmp / "sb" / uuid.uuid4().hex)
        assert result.outcome == "ok", result

    def bare(path: Path) -> None:
        with Image.open(path, formats=("HEIF",)) as im:
            im.thumbnail((2048, 2048))
            shown = im.convert("RGB")
        shown.save(io.BytesIO(), "JPEG", quality=85)
        shown.thumbnail((256, 256))
        shown.save(io.BytesIO(), "WEBP", quality=80, method=2)

    def in_process(path: Path) -> None:
        work = tmp / "ip" / uuid.uuid4().hex
        work.mkdir(parents=True)
        image_decoder.process(path, work, bounds)

    methods = {"run_job": sandboxed, "bare": bare, "in_process": in_process}
    preload()  # the fork server preloads and warms the decoders; do the same for in-process calls
    per_round = paired_rounds(methods, photos, rounds, settle=SETTLE_SECONDS)
    shutdown()
    shutil.rmtree(tmp, ignore_errors=True)

    def ratio(ours: str, base: str) -> float | None:
        return r(median(a / b for a, b in zip(per_round[ours], per_round[base])))

    emit(
        {
            "heic_thumbnail_vs_bare_ratio": ratio("run_job", "bare"),
            "heic_inprocess_vs_bare_ratio": ratio("in_process", "bare"),
            "heic_ms_per_photo": {name: r(median(v) * 1000, 1) for name, v in per_round.items()},
            "heic_photo": {"size": list(size), "photos": len(photos), "rounds": rounds},
        }
    )


if __name__ == "__main__":
    main()
