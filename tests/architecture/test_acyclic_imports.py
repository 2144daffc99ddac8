"""The product packages import one another without cycles, counting imports inside functions too.

A cycle is a pair (or ring) of modules that each need the other: it forces an
import into a function to dodge the loop at start-up, and it means neither can
be read, tested or moved alone. The graph is read from the source
(tests/architecture/import_graph.py): at module level it must be acyclic, and it
must stay so with every function-level import added, so that deferring an
import can no longer hide a loop.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.architecture.import_graph import (
    PACKAGES,
    ROOT,
    find_cycle,
    function_level_imports,
    import_graph,
    module_imports,
)


def test_every_product_package_is_read():
    graph = import_graph()
    assert {name.split(".")[0] for name in graph} == set(PACKAGES)
    assert {
        "processing.pipeline",
        "processing.sandbox.runner",
        "attachments.api.errors",
        "ops.body_first",
        "sweeper.sweep",
        "webhooks.actors",
        "config.settings.base",
    } <= set(graph)
    assert "processing.steps.registry" in graph["processing.pipeline"]


def test_the_module_level_import_graph_is_acyclic():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_function_level_import_hides_a_cycle():
    cycle = find_cycle(import_graph(in_functions=True))
    assert cycle is None, "import cycle through a function-level import: " + " -> ".join(cycle or [])


def test_function_level_imports_are_counted():
    # 202 before issue #33's cycles were removed; a new one needs a reason (weight, app loading).
    # +2: the transcode decoder loaded only in the fork server (sandbox/kinds.py), its tick registered in ready().
    # +4: the Cloudflare SDK loaded only by the queue consumer (weight); /readyz's queue-consumer and waiting-files
    # checks and /metrics' queue gauges read models (ops/ is imported before the apps are ready); the scheduler
    # tick's broker-epoch check (processing is loaded after attachments); liveness lost two.
    assert len(function_level_imports()) <= 181


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, None),
        ({"a": {"b"}, "b": {"a"}}, ["a", "b", "a"]),
        ({"a": {"b"}, "b": {"c"}, "c": {"d"}, "d": {"b"}}, ["b", "c", "d", "b"]),
        ({"a": {"b", "c"}, "b": {"d"}, "c": {"d"}, "d": set()}, None),  # a diamond is no cycle
    ],
)
def test_the_checker_finds_cycles(graph, expected):
    assert find_cycle(graph) == expected


def test_module_imports_reads_what_runs_at_import():
    known = {"p", "p.a", "p.b", "p.c", "p.d", "p.sub", "p.sub.e"}
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import a\n"
        "from .b import name\n"
        "import p.sub.e\n"
        "if TYPE_CHECKING:\n"
        "    from . import c\n"
        "def f():\n"
        "    from . import d\n"
    )
    assert module_imports(source, "p.x", is_package=False, known=known) == {"p.a", "p.b", "p.sub.e"}
    assert module_imports(source, "p.x", is_package=False, known=known, in_functions=True) == {
        "p.a",
        "p.b",
        "p.sub.e",
        "p.d",
    }


@pytest.mark.parametrize("in_function", [False, True])
def test_a_planted_cycle_fails_the_check(tmp_path: Path, in_function: bool):
    """A copy of the tree with one import planted from the sandbox back into the steps."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    runner = tmp_path / "processing" / "sandbox" / "runner.py"
    planted = (
        "    from processing.steps.registry import STEPS\n"
        if in_function
        else "from processing.steps.registry import STEPS\n"
    )
    runner.write_text(runner.read_text() + ("\ndef _planted():\n" if in_function else "\n") + planted)
    module_level = find_cycle(import_graph(tmp_path))
    every_import = find_cycle(import_graph(tmp_path, in_functions=True))
    assert (module_level is None) == in_function
    assert every_import is not None
    assert {"processing.sandbox.runner", "processing.steps.registry"} <= set(every_import)
