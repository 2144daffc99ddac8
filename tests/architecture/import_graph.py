"""The module-level import graph of the product packages, read from the source (nothing is imported).

An edge a -> b means importing module a runs `import b` (or `from b import x`)
at its top level. Imports under `if TYPE_CHECKING:` never run and are no edge;
imports inside a function run later and are an edge only with in_functions=True.
`from pkg import name` is an edge to pkg.name when that is a module of the tree,
else to pkg.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("attachments", "processing", "sweeper", "ops", "config", "webhooks")


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def product_modules(root: Path = ROOT, packages: Iterable[str] = PACKAGES) -> dict[str, Path]:
    return {
        module_name(p, root): p
        for package in packages
        for p in sorted((root / package).rglob("*.py"))
        if "migrations" not in p.parts
    }


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(body: list[ast.stmt], in_functions: bool) -> Iterable[ast.Import | ast.ImportFrom]:
    """Imports that run when the module is imported (the body, its if/try/with blocks and class
    bodies), and those in function bodies too with in_functions; never those under TYPE_CHECKING."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _imports(node.body, in_functions)
            yield from _imports(node.orelse, in_functions)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from _imports(block, in_functions)
        elif isinstance(node, (ast.With, ast.ClassDef, ast.For, ast.While)):
            yield from _imports(node.body, in_functions)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and in_functions:
            yield from _imports(node.body, in_functions)


def module_imports(
    source: str, module: str, *, is_package: bool, known: Collection[str], in_functions: bool = False
) -> set[str]:
    """The modules of `known` that `module` imports at its top level (and in its functions, with in_functions)."""
    found: set[str] = set()
    for node in _imports(ast.parse(source).body, in_functions):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            target = _absolute(module, is_package, node)
            targets = [f"{target}.{a.name}" if f"{target}.{a.name}" in known else target for a in node.names]
        for target in targets:
            while target and target not in known:  # `import a.b.c` where c is a name: the nearest module
                target = target.rpartition(".")[0]
            if target and target != module:
                found.add(target)
    return found


def import_graph(
    root: Path = ROOT, packages: Iterable[str] = PACKAGES, *, in_functions: bool = False
) -> dict[str, set[str]]:
    modules = product_modules(root, packages)
    return {
        name: module_imports(
            path.read_text(), name, is_package=path.name == "__init__.py", known=modules, in_functions=in_functions
        )
        for name, path in modules.items()
    }


def find_cycle(graph: Mapping[str, Iterable[str]]) -> list[str] | None:
    """One cycle as a path [a, b, ..., a], or None when the graph is acyclic (iterative DFS)."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    for start in sorted(graph):
        if state.get(start):
            continue
        path = [start]
        stack = [iter(sorted(graph.get(start, ())))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def function_level_imports(root: Path = ROOT, packages: Iterable[str] = PACKAGES) -> list[str]:
    """`module:line` for every import statement inside a function body."""
    found = []
    for name, path in product_modules(root, packages).items():
        for func in ast.walk(ast.parse(path.read_text())):
            if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found += [f"{name}:{n.lineno}" for n in ast.walk(func) if isinstance(n, (ast.Import, ast.ImportFrom))]
    return sorted(set(found))
