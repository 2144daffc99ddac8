"""Verdicts of the YARA scan over archive members (inside the sandbox job) are counted in
airlock_scan_results_total like the top-level scans, as scanner="yara_members"."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from attachments.profiles import get_profile
from processing.errors import ContentRejected
from processing.steps import StepInput
from processing.steps.registry import decoder_for
from tests.support import EICAR, zip_bytes


def _count(outcome: str) -> float:
    return (
        REGISTRY.get_sample_value("airlock_scan_results_total", {"scanner": "yara_members", "outcome": outcome}) or 0.0
    )


def _zip_step(data: bytes, tmp_path: Path):  # type: ignore[no-untyped-def]
    profile = get_profile("archive")
    src, work = tmp_path / "in.zip", tmp_path / "work"
    src.write_bytes(data)
    work.mkdir()
    step = decoder_for(profile, "application/zip")
    return lambda: step.run(
        StepInput(profile=profile, size=len(data), content_type="application/zip", path=src, work_dir=work)
    )


def test_an_infected_member_counts_an_infected_verdict(tmp_path: Path) -> None:
    before, clean = _count("infected"), _count("clean")
    run = _zip_step(zip_bytes({"readme.txt": b"hello", "tools/eicar.com": EICAR}), tmp_path)
    with pytest.raises(ContentRejected) as caught:
        run()
    assert caught.value.code == "malware"
    assert caught.value.message.startswith("yara: EICAR")
    assert (_count("infected"), _count("clean")) == (before + 1, clean)


def test_an_archive_whose_members_are_clean_counts_a_clean_verdict(tmp_path: Path) -> None:
    before, infected = _count("clean"), _count("infected")
    _zip_step(zip_bytes({"a.txt": b"hello", "b.txt": b"world"}), tmp_path)()
    assert (_count("clean"), _count("infected")) == (before + 1, infected)


def test_no_member_scan_no_verdict(tmp_path: Path, settings) -> None:  # type: ignore[no-untyped-def]
    settings.AIRLOCK_YARA_ENABLED = False  # no rules for the job: nothing was scanned, nothing counted
    before = _count("clean")
    _zip_step(zip_bytes({"a.txt": b"hello"}), tmp_path)()
    assert _count("clean") == before
