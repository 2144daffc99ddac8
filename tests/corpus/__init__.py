"""The hostile corpus lives in the repository: tests/corpus/files/ (see SOURCES.md there).

`AIRLOCK_CORPUS_DIR` points the tests at another corpus of the same layout
(a `MANIFEST.tsv` beside `<source>/<file>` folders), e.g. a larger private one.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

BUNDLED = Path(__file__).resolve().parent / "files"


def corpus_dir() -> Path:
    override = os.environ.get("AIRLOCK_CORPUS_DIR")
    return Path(override) if override else BUNDLED


def manifest_paths(corpus: Path | None = None) -> set[str]:
    """The `path` column of the corpus's MANIFEST.tsv: every file it holds, relative to it."""
    with open((corpus or corpus_dir()) / "MANIFEST.tsv", newline="") as fh:
        return {row["path"] for row in csv.DictReader(fh, delimiter="\t")}
