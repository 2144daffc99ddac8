"""docs/api.md covers the API the code serves: every route, every error code, every reason code.

Everything is collected from the code, never from a hand-kept list, so an
endpoint or a code added without documenting it fails here:
- the paths and methods of the generated OpenAPI document, and every other
  URL route outside the admin (probes, metrics, schema);
- error codes: the `code` of every AirlockError subclass (imported from every
  module of the project's packages), and every literal code given to
  `error_body(...)` or written as `{"error": {"code": ...}}`;
- reason codes: the members of attachments.reasons.ReasonCode, the one list;
  and every code spelled as a literal (where Django cannot be imported: the
  steps and the sandbox) must be one of them: `ContentRejected("...")`,
  `Rejected("...")`, `code="..."` keywords, `reason_code`/`bound_reason`
  assignments and comparisons, the sandbox's REASON_CODES;
- metric names: every `airlock_…` name given to a prometheus metric or metric family.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "api.md"
# The served code: top-level packages (folders with an __init__.py), tests and benchmarks aside.
PACKAGES = sorted(p.parent.name for p in ROOT.glob("*/__init__.py") if p.parent.name not in {"tests", "bench"})


def _sources() -> Iterator[tuple[Path, ast.Module]]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _section(text: str, heading: str) -> str:
    """The text under a markdown heading, up to the next heading of the same or a higher level."""
    level = len(heading) - len(heading.lstrip("#"))
    match = re.search(rf"^{re.escape(heading)}\s*$", text, re.M)
    assert match, f"docs/api.md has no {heading!r} section"
    rest = text[match.end() :]
    end = re.search(rf"^#{{1,{level}}} ", rest, re.M)
    return rest[: end.start()] if end else rest


# --- routes ---------------------------------------------------------------------------


def schema_operations() -> set[tuple[str, str]]:
    from drf_spectacular.generators import SchemaGenerator

    document = SchemaGenerator().get_schema(request=None, public=True)
    return {
        (method.upper(), path)
        for path, item in document["paths"].items()
        for method in item
        if method in {"get", "put", "post", "patch", "delete", "head", "options"}
    }


def url_routes() -> set[str]:
    """Every route of the URLconf outside the admin, in OpenAPI form (`{name}` for converters)."""
    from django.urls import URLPattern, URLResolver, get_resolver

    routes: set[str] = set()

    def walk(patterns, prefix: str) -> None:
        for entry in patterns:
            route = prefix + str(entry.pattern)
            if isinstance(entry, URLResolver):
                if not route.startswith("admin/"):
                    walk(entry.url_patterns, route)
            elif isinstance(entry, URLPattern) and not route.startswith("admin/") and route:
                routes.add("/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route).lstrip("^").rstrip("$"))

    walk(get_resolver().url_patterns, "")
    return routes


def undocumented_operations(doc: str, operations: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """Operations not written as `METHOD /path` anywhere in the document."""
    return {
        (method, path) for method, path in operations if not re.search(rf"{method} {re.escape(path)}(?![\w/{{-])", doc)
    }


def undocumented_routes(doc: str, routes: set[str]) -> set[str]:
    return {route for route in routes if not re.search(rf"{re.escape(route)}(?![\w/{{-])", doc)}


# --- error codes ------------------------------------------------------------------------


def _import_all() -> None:
    for package in PACKAGES:
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, prefix=f"{package}."):
            if ".migrations" in info.name or info.name.startswith("config.settings."):
                continue
            importlib.import_module(info.name)


def _subclasses(cls: type) -> Iterator[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _first_str_arg(call: ast.Call) -> str | None:
    if call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
        return call.args[0].value
    return None


def _str_values(expr: ast.expr) -> set[str]:
    """The string literals an expression can evaluate to: `"a"`, `"a" if … else "b"`, `x or "a"`."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return {expr.value}
    if isinstance(expr, ast.IfExp):
        return _str_values(expr.body) | _str_values(expr.orelse)
    if isinstance(expr, ast.BoolOp):
        return set().union(*(_str_values(value) for value in expr.values))
    return set()


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def error_codes() -> set[str]:
    from attachments.errors import AirlockError

    _import_all()
    codes = {AirlockError.code} | {cls.code for cls in _subclasses(AirlockError)}
    for _, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _callee(node) == "error_body" and _first_str_arg(node):
                codes.add(_first_str_arg(node))
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == "error" and isinstance(value, ast.Dict):
                        for k, v in zip(value.keys, value.values, strict=True):
                            if (
                                isinstance(k, ast.Constant)
                                and k.value == "code"
                                and isinstance(v, ast.Constant)
                                and isinstance(v.value, str)
                            ):
                                codes.add(v.value)
    return codes


def reason_codes() -> set[str]:
    from attachments.reasons import ReasonCode

    return set(ReasonCode.values)


# Calls whose first argument is a reason code: processing's and the sandbox's rejections.
_REJECTIONS = {"ContentRejected", "Rejected", "rejected", "_rejected"}
# Names that hold a reason code when assigned or compared (`bound_reason`: a decoding step's).
_REASON_NAMES = {"reason_code", "bound_reason"}


def _name(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def spelled_reason_codes(trees: list[ast.Module] | None = None) -> set[str]:
    """Reason codes written as string literals (the sandbox, which runs without Django, has to)."""
    from processing.sandbox.outcome import REASON_CODES as SANDBOX_CODES

    codes = set(SANDBOX_CODES) if trees is None else set()
    for tree in trees if trees is not None else [tree for _, tree in _sources()]:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                if _callee(node) in _REJECTIONS and node.args:
                    codes.update(_str_values(node.args[0]))
                for keyword in node.keywords:
                    if keyword.arg in ("code", "reason_code"):
                        codes.update(_str_values(keyword.value))
            if (
                isinstance(node, (ast.Assign, ast.AnnAssign))
                and node.value is not None
                and any(
                    _name(target) in _REASON_NAMES
                    for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                )
            ):
                codes.update(_str_values(node.value))
            if isinstance(node, ast.Compare) and _name(node.left) in _REASON_NAMES:
                for comparator in node.comparators:
                    codes.update(_str_values(comparator))
    return codes - {""}  # no reason (a row that is not rejected nor failed)


def metric_names() -> set[str]:
    names = set()
    for _, tree in _sources():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and re.search(r"(Counter|Gauge|Histogram|Summary|Info|Enum|MetricFamily)$", _callee(node))
                and (_first_str_arg(node) or "").startswith("airlock_")
            ):
                names.add(_first_str_arg(node))
    return names


def undocumented_codes(section: str, codes: set[str]) -> set[str]:
    """Codes not written as `CODE` in a table row of the section."""
    rows = "\n".join(line for line in section.splitlines() if line.startswith("|"))
    return {code for code in codes if f"`{code}`" not in rows}


# --- the tests ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def doc() -> str:
    return DOC.read_text(encoding="utf-8")


def test_every_schema_operation_is_documented(doc):
    operations = schema_operations()
    assert ("POST", "/api/v1/uploads") in operations  # the collection itself works
    assert undocumented_operations(doc, operations) == set()


def test_every_route_is_documented(doc):
    routes = url_routes()
    assert {"/healthz", "/readyz", "/metrics", "/api/v1/schema"} <= routes
    assert "/api/v1/attachments/{attachment_id}/download" in routes
    assert undocumented_routes(doc, routes) == set()


def test_every_error_code_is_documented(doc):
    codes = error_codes()
    assert {"NOT_FOUND", "RATE_LIMITED", "INTERNAL", "METHOD_NOT_ALLOWED"} <= codes
    assert undocumented_codes(_section(doc, "## Errors"), codes) == set()


def test_every_reason_code_is_documented(doc):
    codes = reason_codes()
    assert {"malware", "object_missing", "too_large", "archive_limit", "infrastructure"} <= codes
    assert undocumented_codes(_section(doc, "#### Reason codes"), codes) == set()


def test_every_reason_code_in_the_code_is_a_reason_code_member():
    spelled = spelled_reason_codes()
    assert {"corrupt", "pixel_limit", "timeout"} <= spelled  # the sandbox's literals are found
    assert spelled - reason_codes() == set()
    stray = ast.parse(
        'raise ContentRejected("made_up", "x")\nrow.reason_code = "also_made_up"\n'
        'raise Rejected("corrupt" if bad else "new_limit", "y")\nbound_reason = "a_bound"\n'
        'if reason_code == "compared": pass\n'
    )
    assert spelled_reason_codes([stray]) - reason_codes() == {
        "made_up",
        "also_made_up",
        "new_limit",
        "a_bound",
        "compared",
    }


def test_every_metric_is_documented(doc):
    names = metric_names()
    assert {"airlock_attachments", "airlock_scan_results_total", "airlock_sweeper_runs_total"} <= names
    assert undocumented_codes(_section(doc, "### `GET /metrics`"), names) == set()


def test_a_missing_path_or_code_is_caught(doc):
    """The checks see a gap: drop one operation's lines, or one code's row, and they report it."""
    without_search = "\n".join(line for line in doc.splitlines() if "/api/v1/search" not in line)
    assert undocumented_operations(without_search, schema_operations()) == {("GET", "/api/v1/search")}
    assert undocumented_routes(without_search, url_routes()) == {"/api/v1/search"}
    # A longer path must not count for its prefix.
    only_longer = doc.replace("/api/v1/attachments/{attachment_id}`", "/api/v1/attachments/{attachment_id}/x`")
    assert ("GET", "/api/v1/attachments/{attachment_id}") in undocumented_operations(only_longer, schema_operations())
    errors = _section(doc, "## Errors")
    without_conflict = "\n".join(line for line in errors.splitlines() if "`ALREADY_UPLOADED`" not in line)
    assert undocumented_codes(without_conflict, error_codes()) == {"ALREADY_UPLOADED"}
    reasons = _section(doc, "#### Reason codes")
    without_malware = "\n".join(line for line in reasons.splitlines() if "`malware`" not in line)
    assert undocumented_codes(without_malware, reason_codes()) == {"malware"}
    metrics = _section(doc, "### `GET /metrics`")
    without_stuck = "\n".join(line for line in metrics.splitlines() if "airlock_processing_stuck" not in line)
    assert undocumented_codes(without_stuck, metric_names()) == {"airlock_processing_stuck"}
