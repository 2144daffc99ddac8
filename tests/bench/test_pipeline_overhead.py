"""bench/pipeline_overhead.py's baselines: the bare steps decode in process, or each in a confined sandbox job."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import processing.sandbox
from bench import pipeline_overhead
from bench.common import photo_jpeg, text_pdf
from processing import sandbox_config
from processing.sandbox import Bounds, images, pdfs, shutdown
from processing.scanners.base import Verdict


class CleanScanner:
    """Every file clean: the scan is not what these tests look at."""

    name = "stub"

    def scan(self, chunks, *, path=None) -> Verdict:
        for _ in chunks:
            pass
        return Verdict("stub", "clean", None)


@pytest.fixture(autouse=True)
def _stop_fork_server():
    yield
    shutdown()


@pytest.fixture
def jobs(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Every run_job call (passed through to the real sandbox), its kind, limits and member rules."""
    calls: list[dict] = []
    real = processing.sandbox.run_job

    def spy(kind, input_path, work_dir, **kwargs):
        calls.append({"kind": kind, "input": Path(input_path), **kwargs})
        return real(kind, input_path, work_dir, **kwargs)

    monkeypatch.setattr(processing.sandbox, "run_job", spy)
    return calls


def decoders_poisoned(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the decoders fail in this process: a decode that still succeeds ran elsewhere."""

    def poisoned(*args, **kwargs):
        raise AssertionError(f"decoded in the bench's own process ({os.getpid()})")

    monkeypatch.setattr(images, "process", poisoned)
    monkeypatch.setattr(pdfs, "process", poisoned)


@pytest.mark.parametrize(
    ("profile", "name", "data", "kind"),
    [
        ("image", "photo.jpg", lambda: photo_jpeg(1, size=(640, 480)), "image"),
        ("document", "report.pdf", lambda: text_pdf(2, seed=1), "pdf"),
    ],
)
def test_the_confined_baseline_decodes_each_file_in_a_sandbox_job_as_the_product_sends_it(
    tmp_path, monkeypatch, jobs, profile, name, data, kind
):
    path = tmp_path / name
    path.write_bytes(data())
    decoders_poisoned(monkeypatch)

    pipeline_overhead.bare_steps(path, profile, tmp_path / "work", [CleanScanner()], Bounds(), confined=True)

    assert [(c["kind"], c["input"]) for c in jobs] == [(kind, path)]
    assert jobs[0]["limits"] == sandbox_config.limits_for(kind, path)
    assert jobs[0]["member_rules"] == sandbox_config.member_rules_dir()
    (work,) = (tmp_path / "work").iterdir()
    assert any(work.iterdir()), "the job wrote no derivative"


def test_the_in_process_baseline_sends_no_sandbox_job(tmp_path, jobs):
    path = tmp_path / "photo.jpg"
    path.write_bytes(photo_jpeg(2, size=(640, 480)))

    pipeline_overhead.bare_steps(path, "image", tmp_path / "work", [CleanScanner()], Bounds())

    assert jobs == []
