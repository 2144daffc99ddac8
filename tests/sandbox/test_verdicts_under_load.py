"""Verdicts do not depend on what runs beside a job.

The corpus runs through real run_job calls twice under the same tight memory limit:
one file at a time, then four at once (each job settled as the pipeline settles it: a
resource limit is re-run alone, solo.py). Every file must get the same outcome both
ways. The archive jobs scan their members with YARA (yara-x runs a timer thread in the
job): the stray sweep once took such a thread for a stray process and SIGKILLed the
job when another job finished at the same moment, which made RecursiveExtractor's
nested zip rejected/corrupt under load and ready alone.
"""

from __future__ import annotations

import csv
import io
import itertools
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from processing.sandbox import Limits, SandboxResult, run_job
from processing.sandbox.solo import ResourcePressure, run_settled
from tests.sandbox.helpers import corpus_dir, outcome

KIND = {"image": "image", "document": "pdf", "archive": "zip"}
RULES = Path(__file__).resolve().parents[2] / "processing" / "rules"
TIGHT = Limits(address_space_bytes=512 << 20, wall_seconds=120.0)  # default: 1 GiB, 60 s
NESTED = "recursive-extractor/TestDataArchivesNested.zip"


def macos_nested_zip() -> bytes:
    """A zip as macOS's Archive Utility makes one: a folder, __MACOSX/._* AppleDouble
    entries beside each file, and a zip inside it (holding its own __MACOSX)."""

    def build(entries: list[tuple[str, bytes]]) -> bytes:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in entries:
                zf.writestr(name, data)
        return buf.getvalue()

    apple_double = b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        " + b"\x00" * 66
    inner = build([("notes/", b""), ("notes/a.txt", b"hello " * 200), ("__MACOSX/notes/._a.txt", apple_double)])
    return build(
        [
            ("Archive/", b""),
            ("Archive/inner.zip", inner),
            ("Archive/Lorem.txt", b"lorem ipsum " * 500),
            ("__MACOSX/Archive/._inner.zip", apple_double),
            ("__MACOSX/Archive/._Lorem.txt", apple_double),
        ]
    )


def _cases(tmp: Path) -> list[tuple[str, str, Path]]:
    with open(corpus_dir() / "MANIFEST.tsv", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    cases = [(r["path"], KIND[r["profile"]], corpus_dir() / r["path"]) for r in rows if r["profile"] in KIND]
    generated = tmp / "macos-nested.zip"
    generated.write_bytes(macos_nested_zip())
    # The nested zips more than once: they are the files that were rejected under load.
    extra = [
        ("macos-nested.zip", "zip", generated),
        *[(f"{NESTED}#{i}", "zip", corpus_dir() / NESTED) for i in range(3)],
    ]
    return cases + extra


def _verdicts(cases: list[tuple[str, str, Path]], tmp: Path, workers: int) -> dict[str, str]:
    counter = itertools.count()
    lock = tmp / "solo.lock"

    def one(case: tuple[str, str, Path]) -> tuple[str, str]:
        name, kind, path = case

        def run(work: Path) -> SandboxResult:
            return run_job(kind, path, work, limits=TIGHT, member_rules=RULES)  # as production: one set

        work = tmp / f"{workers}-{next(counter)}"
        try:
            result = run_settled(run, work, wait_seconds=TIGHT.wall_seconds, lock_path=lock)
        except ResourcePressure as exc:
            return name, f"transient: {exc}"
        detail = "" if result.outcome == "ok" else f" ({result.message})"
        return name, outcome(result) + detail

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return dict(pool.map(one, cases))


def _strip(verdicts: dict[str, str]) -> dict[str, str]:
    return {name: v.split(" (", 1)[0] for name, v in verdicts.items()}


def test_four_jobs_at_once_under_a_tight_memory_limit_match_one_at_a_time(tmp_path: Path) -> None:
    cases = _cases(tmp_path)
    alone = _verdicts(cases, tmp_path, workers=1)
    together = _verdicts(cases, tmp_path, workers=4)
    assert alone[NESTED] == "ready" and alone["macos-nested.zip"] == "ready", alone
    differing = {name: (alone[name], together[name]) for name in alone if _strip(alone)[name] != _strip(together)[name]}
    assert not differing, differing
    assert not [v for v in alone.values() if v.startswith("transient")]
