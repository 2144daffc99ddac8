"""docs/performance.md's figures and the README's performance summary are what bench/results.json holds."""

from __future__ import annotations

import json

import pytest

from bench import report


def results() -> dict[str, object]:
    return json.loads(report.RESULTS.read_text())


def test_the_documents_say_what_bench_results_json_holds():
    assert report.stale(results()) == [], "run .venv/bin/python bench/report.py after the bench"


def test_every_figure_the_table_names_is_in_the_results():
    measured = results()
    named = [key for _, rows in report.SECTIONS for _, keys, _ in rows for key in keys if isinstance(key, str)]
    assert [key for key in named if key not in measured] == []


def test_a_changed_figure_makes_the_documents_stale():
    changed = {**results(), "time_to_ready_p99_s": 9.876}
    assert report.stale(changed) == ["docs/performance.md", "README.md"]


def test_a_document_without_its_markers_is_an_error():
    with pytest.raises(ValueError, match="marker"):
        report.generated("# Performance\n\nno table here\n", "<!-- bench/report.py: figures -->", "<!-- end -->")
