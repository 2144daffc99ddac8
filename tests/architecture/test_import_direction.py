"""Dependencies point one way: ops -> sweeper -> webhooks -> processing -> attachments.

Every module of the five apps is parsed (not imported) and each import is
resolved to the top-level package it names, wherever it sits: module level,
inside a function, under TYPE_CHECKING, relative or absolute. Dotted strings
naming a module of a higher layer ("processing.x.Y", as settings and
import_module take them) count too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APPS = ("attachments", "processing", "webhooks", "sweeper", "ops")

# What each app must never import. The sweeper may use processing (reconcile re-drives
# lost arrivals through processing.recovery); processing never drives the sweeper.
# Webhooks sit on the pipeline (deliveries run as its jobs, on attachments' events);
# the sweeper may reach them (retention trims delivery rows), the pipeline may not:
# an event reaches webhooks through attachments' outbox, never by an import.
FORBIDDEN = {
    "attachments": {"processing", "webhooks", "sweeper", "ops"},
    "processing": {"webhooks", "sweeper", "ops"},
    "webhooks": {"sweeper", "ops"},
    "sweeper": {"ops"},
    "ops": set(),
}
_DOTTED = re.compile(r"^(?P<top>[a-z_]+)\.[A-Za-z_][\w.]*$")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)] if node.level - 1 <= len(package) else []
    return ".".join([*base, node.module] if node.module else base)


def _names_a_module(dotted: str) -> bool:
    """True when a string like "processing.request_context.X" starts with a real module of the tree."""
    parts = dotted.split(".")
    return ROOT.joinpath(*parts[:2]).with_suffix(".py").is_file() or ROOT.joinpath(*parts[:2], "__init__.py").is_file()


def imported_packages(source: str, module: str, *, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, top-level package) for every import in `source`, and for every dotted module string."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, is_package, node)
            if target:
                found.append((node.lineno, target.split(".")[0]))
            else:  # `from ... import x` climbing above the tree's top: x is a top-level package
                found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = _DOTTED.match(node.value)
            if match and match["top"] in APPS and _names_a_module(node.value):
                found.append((node.lineno, match["top"]))
    return found


def violations(source: str, module: str, *, is_package: bool = False) -> list[str]:
    app = module.split(".")[0]
    return [
        f"{module}:{line} imports {package}"
        for line, package in imported_packages(source, module, is_package=is_package)
        if package in FORBIDDEN.get(app, set())
    ]


def _modules() -> list[Path]:
    return sorted(p for app in APPS for p in (ROOT / app).rglob("*.py"))


def test_every_app_is_parsed():
    names = {_module_name(p) for p in _modules()}
    assert {
        "attachments.models",
        "processing.pipeline",
        "sweeper.sweep",
        "ops.runtime",
        "ops.management.commands.serve",
        "webhooks.models",
        "webhooks.services.delivery",
    } <= names


def test_dependencies_point_one_way():
    problems = []
    for path in _modules():
        problems += violations(path.read_text(), _module_name(path), is_package=path.name == "__init__.py")
    assert problems == []


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        (
            "attachments.health",
            "from processing.scanners import scanners_from_settings",
            ["attachments.health:1 imports processing"],
        ),
        (
            "attachments.uploads.services.uploads",
            "def f():\n    from sweeper.control import delete_brake\n",
            ["attachments.uploads.services.uploads:2 imports sweeper"],
        ),
        ("attachments.metrics", "import sweeper.metrics", ["attachments.metrics:1 imports sweeper"]),
        ("attachments.admin.views", "from ...ops import views", ["attachments.admin.views:1 imports ops"]),
        ("attachments.admin.views", "from ... import ops", ["attachments.admin.views:1 imports ops"]),
        (
            "attachments.x",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from processing import steps\n",
            ["attachments.x:3 imports processing"],
        ),
        ("attachments.x", 'WORKER = "ops.httpserver.AirlockThreadWorker"', ["attachments.x:1 imports ops"]),
        ("processing.pipeline", "from sweeper.schedule import sweep_if_due", ["processing.pipeline:1 imports sweeper"]),
        ("sweeper.sweep", "from ops import runtime", ["sweeper.sweep:1 imports ops"]),
        (
            "attachments.services.processing",
            "from webhooks.services.emit import x",
            ["attachments.services.processing:1 imports webhooks"],
        ),
        ("processing.pipeline", "def f():\n    import webhooks.actors\n", ["processing.pipeline:2 imports webhooks"]),
        ("processing.x", 'ACTOR = "webhooks.actors.deliver"', ["processing.x:1 imports webhooks"]),
        (
            "webhooks.services.delivery",
            "from sweeper.control import delete_brake",
            ["webhooks.services.delivery:1 imports sweeper"],
        ),
        ("webhooks.actors", "from ops.runtime import x", ["webhooks.actors:1 imports ops"]),
        # Allowed directions and look-alikes.
        ("ops.runtime", "from sweeper.schedule import sweep_if_due\nfrom processing import outcomes", []),
        ("sweeper.reconcile", "from processing.recovery import redrive_pending", []),
        ("sweeper.retention", "from webhooks.models import Delivery", []),
        ("webhooks.services.emit", "from attachments.models import Attachment\nfrom processing import fairness", []),
        ("attachments.admin.views", "from ..models import Attachment\nfrom . import charts", []),
        ("attachments.x", 'log.info("processing.started")\nSTEP = "sweeper.nothing_here"', []),
    ],
)
def test_the_check_sees_forbidden_imports(module, source, expected):
    assert violations(source, module) == expected
